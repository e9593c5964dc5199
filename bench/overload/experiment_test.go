package overloadbench_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/priority"
	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/overload"
)

var (
	experiment = flag.Bool("overload.experiment", false,
		"run the overload experiment (about 15 s of real time, or nine minutes with -overload.long); bench/run.sh overload does")
	long = flag.Bool("overload.long", false,
		"run the full experiment (every layer, both loads, five seconds a run, five trials: about nine minutes) instead of the short one")
	trials = flag.Int("overload.trials", 0,
		"run each cell this many times, each from arrivals of its own, and pool the counts (default: 5 with -overload.long, else 1)")
	onlyLayers = flag.String("overload.only", "", "with -overload.long, run only the layers whose names this regular expression matches")
	outFile    = flag.String("overload.out", "", "write the table of results to this file")
	plotTo     = flag.String("overload.plot", "", "draw the results to this PNG file")
)

// The backend: capacity slots, each request holding one for service, so it
// serves capacity/service requests a second. Requests it is given beyond
// its slots wait inside it, in arrival order.
const (
	capacity = 8
	service  = 100 * time.Millisecond
	// perSecond is what the backend serves at most.
	perSecond = float64(capacity) * float64(time.Second) / float64(service)
	// clientTimeout is every request's deadline, from the client's side.
	clientTimeout = time.Second
)

const (
	critical  = 0
	sheddable = 1
)

var classNames = [2]string{"critical", "sheddable"}

// backend is the service behind the admission layer. It keeps its own
// record of the requests it was given at once, so that the experiment
// checks the limit from the server's side.
type backend struct {
	slots       chan struct{}
	inFlight    atomic.Int64
	maxInFlight atomic.Int64
}

func newBackend() *backend { return &backend{slots: make(chan struct{}, capacity)} }

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	for m := b.maxInFlight.Load(); n > m && !b.maxInFlight.CompareAndSwap(m, n); m = b.maxInFlight.Load() {
	}
	select {
	case b.slots <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	t := time.NewTimer(service)
	select {
	case <-t.C:
	case <-r.Context().Done():
		t.Stop()
	}
	<-b.slots
	w.WriteHeader(http.StatusOK)
}

// layer is an admission layer under test: wrap puts it in front of the
// backend, stop ends what it runs in the background.
type layer struct {
	name string
	wrap func(http.Handler) http.Handler
	stop func()
}

func classOf(r *http.Request) int {
	if strings.EqualFold(r.Header.Get(overload.DefaultClassHeader), classNames[critical]) {
		return critical
	}
	return sheddable
}

var gateClasses = []overload.Class{{Name: classNames[critical]}, {Name: classNames[sheddable]}}

// gateFIFO is the overload gate at the backend's capacity, critical before
// sheddable, each class in arrival order: waiters wait until served or
// their client gives up.
func gateFIFO() layer {
	g := overload.MustNew(capacity, capacity, gateClasses)
	return layer{name: "gate-fifo", wrap: overload.Middleware(g), stop: func() {}}
}

// gateCoDel is the same gate in its overload mode, with CoDel's defaults.
func gateCoDel() layer {
	g := overload.MustNew(capacity, capacity, gateClasses, overload.WithCoDel(0, 0))
	return layer{name: "gate-codel", wrap: overload.Middleware(g), stop: func() {}}
}

// failsafeLayer is failsafe-go's prioritized limiter, its limit pinned at
// the backend's capacity, with its default queueing (rejection between 2
// and 3 times the limit queued) and its prioritizer calibrated every
// 100 ms; critical requests are priority High, sheddable ones Low.
func failsafeLayer() layer {
	p := adaptivelimiter.NewPrioritizer()
	lim := adaptivelimiter.NewBuilder[any]().WithLimits(capacity, capacity, capacity).BuildPrioritized(p)
	ctx, cancel := context.WithCancel(context.Background())
	stopCal := p.ScheduleCalibrations(ctx, 100*time.Millisecond)
	return layer{
		name: "failsafe",
		wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				prio := priority.Low
				if classOf(r) == critical {
					prio = priority.High
				}
				permit, err := lim.AcquirePermitWithPriority(r.Context(), prio)
				if err != nil {
					http.Error(w, "shed", http.StatusServiceUnavailable)
					return
				}
				defer permit.Record()
				next.ServeHTTP(w, r)
			})
		},
		stop: func() { stopCal(); cancel() },
	}
}

// netflixLayer is the model of Netflix's partitioned limiter at the
// backend's capacity, with the shares of its documentation's example: 0.9
// for the critical partition, 0.1 for the other.
func netflixLayer() layer {
	p := newNetflixPartitions(capacity, 0.9, 0.1)
	return layer{
		name: "netflix",
		wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c := classOf(r)
				if !p.acquire(c) {
					http.Error(w, "shed", http.StatusServiceUnavailable)
					return
				}
				defer p.release(c)
				next.ServeHTTP(w, r)
			})
		},
		stop: func() {},
	}
}

// arrival is one request of an open-loop schedule.
type arrival struct {
	at    time.Duration
	class int
}

// schedule returns Poisson arrivals at rate a second for d, each critical
// or sheddable with even odds, from seed: the same seed gives the same
// arrivals, so that the critical requests of a mixed run and of the run of
// critical requests alone are the very same.
func schedule(seed uint64, rate float64, d time.Duration) []arrival {
	rng := rand.New(rand.NewPCG(seed, 60))
	var out []arrival
	for at := time.Duration(0); ; {
		at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		if at >= d {
			return out
		}
		out = append(out, arrival{at: at, class: rng.IntN(2)})
	}
}

// only keeps the arrivals of one class.
func only(arrs []arrival, class int) []arrival {
	var out []arrival
	for _, a := range arrs {
		if a.class == class {
			out = append(out, a)
		}
	}
	return out
}

type outcome uint8

const (
	served outcome = iota
	shed
	timedOut
	failed
)

type record struct {
	arrival
	latency time.Duration
	outcome outcome
}

// run offers the schedule to the backend behind l over real HTTP on
// loopback and returns what each request got, and the most requests the
// backend was given at once.
func run(t *testing.T, l layer, arrs []arrival) ([]record, int64) {
	be := newBackend()
	srv := httptest.NewServer(l.wrap(be))
	tr := &http.Transport{MaxIdleConnsPerHost: 4096, MaxIdleConns: 4096}
	client := &http.Client{Transport: tr}
	defer func() {
		tr.CloseIdleConnections()
		srv.Close()
		l.stop()
	}()
	recs := make([]record, len(arrs))
	var wg sync.WaitGroup
	begin := time.Now()
	for i, a := range arrs {
		if d := a.at - time.Since(begin); d > 0 {
			time.Sleep(d)
		}
		wg.Go(func() { recs[i] = do(client, srv.URL, a) })
	}
	wg.Wait()
	return recs, be.maxInFlight.Load()
}

// do sends one request and times it.
func do(client *http.Client, url string, a arrival) record {
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		panic(err)
	}
	req.Header.Set(overload.DefaultClassHeader, classNames[a.class])
	start := time.Now()
	resp, err := client.Do(req)
	r := record{arrival: a}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		r.outcome = timedOut
	case err != nil:
		r.outcome = failed
	default:
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			r.outcome = served
		case http.StatusServiceUnavailable:
			r.outcome = shed
		default:
			r.outcome = failed
		}
	}
	r.latency = time.Since(start)
	return r
}

// summary is what one cell shows, over the requests that arrived in the
// measured stretch (after the warm-up) of each of its trials, pooled.
type summary struct {
	layer, load   string
	goodput       [2]float64 // served a second, by class
	p50, p99      time.Duration
	p99ByClass    [2]time.Duration
	shed, timeout [2]int
	maxInFlight   int64
	// ratioLo and ratioHi are the lowest and highest critical goodput
	// against its run alone among the trials of a mixed cell.
	ratioLo, ratioHi float64
}

// summarize pools the records of a cell's trials, each run's records with
// their arrival times counted from the start of their own run.
func summarize(layerName, load string, trials [][]record, maxInFlight int64, warmup, measure time.Duration) summary {
	s := summary{layer: layerName, load: load, maxInFlight: maxInFlight}
	var all []time.Duration
	var by [2][]time.Duration
	for _, r := range slices.Concat(trials...) {
		if r.at < warmup || r.at >= warmup+measure {
			continue
		}
		switch r.outcome {
		case served:
			all = append(all, r.latency)
			by[r.class] = append(by[r.class], r.latency)
		case shed:
			s.shed[r.class]++
		case timedOut:
			s.timeout[r.class]++
		}
	}
	for c := range by {
		s.goodput[c] = float64(len(by[c])) / measure.Seconds() / float64(len(trials))
		s.p99ByClass[c] = quantile(by[c], 0.99)
	}
	s.p50, s.p99 = quantile(all, 0.5), quantile(all, 0.99)
	return s
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// TestOverloadExperiment offers the backend (8 slots of 100 ms: 80 requests
// a second) 0.5, 2 and 4 times its capacity through each admission layer,
// half of the requests critical and half sheddable, and the critical half
// alone, from the same seeds, so that the critical arrivals of a mixed run
// and of its run alone are the same. It reports critical and sheddable
// goodput, the critical goodput against its run alone, the p50 and p99 of
// the requests served, and the most requests the backend was given at once
// (its own record).
//
// Each cell runs -overload.trials times, each trial from arrivals of its
// own (its mixed run and its run alone from the same ones), and the counts
// and latencies of its trials are pooled: one five-second schedule's ratio
// moves by a few hundredths with its arrivals, as much as the target's
// margin. The table gives the lowest and highest trial's ratio beside the
// pooled one.
//
// It runs with -overload.experiment only. The short version (about 15 s)
// runs the gate in arrival order and in its overload mode at 4 times the
// capacity, one trial, and checks, with margins for a loaded machine: the
// backend never had more than its capacity from the gate; critical
// requests got at least nine tenths of what they got alone; the overload
// mode's p99 is below half of arrival order's. -overload.long runs every
// layer at both loads, five seconds a run, five trials a cell, as
// bench/run.sh overload does.
func TestOverloadExperiment(t *testing.T) {
	if !*experiment {
		t.Skip("a real-time experiment: run it with -overload.experiment (bench/run.sh overload does, and CI's smoke run of that command)")
	}
	if raceEnabled {
		t.Skip("a real-time experiment: under the race detector its figures mean nothing (the plain run checks them)")
	}
	warmup, measure := 500*time.Millisecond, 1500*time.Millisecond
	layers := []func() layer{gateFIFO, gateCoDel}
	loads := []float64{4}
	n := 1
	if *long {
		n = 5
		warmup, measure = time.Second, 5*time.Second
		layers = []func() layer{gateFIFO, gateCoDel, failsafeLayer, netflixLayer}
		loads = []float64{2, 4}
		if *onlyLayers != "" {
			re := regexp.MustCompile(*onlyLayers)
			layers = slices.DeleteFunc(layers, func(mk func() layer) bool {
				l := mk()
				defer l.stop()
				return !re.MatchString(l.name)
			})
		}
	}
	if *trials > 0 {
		n = *trials
	}
	span := warmup + measure
	// seed returns the seed of a trial's arrivals: the first trial's is
	// the same whatever the number of trials.
	seed := func(base uint64, trial int) uint64 { return base + uint64(trial)*1000 }
	// The unloaded figure, with the gate in its overload mode (at half the
	// capacity it never queues for long).
	var unloadedRecs [][]record
	var unloadedMax int64
	for i := range n {
		recs, maxIn := run(t, gateCoDel(), schedule(seed(1, i), perSecond/2, span))
		unloadedRecs, unloadedMax = append(unloadedRecs, recs), max(unloadedMax, maxIn)
	}
	unloaded := summarize("gate-codel", "0.5x", unloadedRecs, unloadedMax, warmup, measure)
	results := []summary{unloaded}
	alone := map[string]summary{}
	for _, load := range loads {
		name := fmt.Sprintf("%gx", load)
		for _, mk := range layers {
			var aloneRecs, mixedRecs [][]record
			var aloneMax, mixedMax int64
			lo, hi := math.Inf(1), 0.0
			var lname string
			for i := range n {
				mixed := schedule(seed(uint64(load*10), i), load*perSecond, span)
				l := mk()
				lname = l.name
				recs, maxIn := run(t, l, only(mixed, critical))
				aloneRecs, aloneMax = append(aloneRecs, recs), max(aloneMax, maxIn)
				a := summarize(lname, name, [][]record{recs}, maxIn, warmup, measure)
				recs, maxIn = run(t, mk(), mixed)
				mixedRecs, mixedMax = append(mixedRecs, recs), max(mixedMax, maxIn)
				m := summarize(lname, name, [][]record{recs}, maxIn, warmup, measure)
				if a.goodput[critical] > 0 {
					r := m.goodput[critical] / a.goodput[critical]
					lo, hi = min(lo, r), max(hi, r)
				}
			}
			alone[lname+name] = summarize(lname, name+" critical alone", aloneRecs, aloneMax, warmup, measure)
			m := summarize(lname, name, mixedRecs, mixedMax, warmup, measure)
			m.ratioLo, m.ratioHi = lo, hi
			results = append(results, alone[lname+name], m)
		}
	}
	table := report(unloaded, results, alone, n)
	t.Log("\n" + table)
	if *outFile != "" {
		require.NoError(t, os.WriteFile(*outFile, []byte(table), 0o644))
	}
	if *plotTo != "" {
		plot(t, *plotTo, unloaded, results, alone)
	}
	if *long {
		return
	}
	// The short version's checks.
	byName := map[string]summary{}
	for _, s := range results {
		byName[s.layer+" "+s.load] = s
	}
	fifo, codel := byName["gate-fifo 4x"], byName["gate-codel 4x"]
	for _, s := range results {
		if strings.HasPrefix(s.layer, "gate") {
			require.LessOrEqual(t, s.maxInFlight, int64(capacity), "%s %s: the backend was given more than its capacity", s.layer, s.load)
		}
	}
	for _, s := range []summary{fifo, codel} {
		a := alone[s.layer+"4x"]
		require.GreaterOrEqual(t, s.goodput[critical], 0.9*a.goodput[critical], "%s: critical goodput against its run alone", s.layer)
	}
	require.Less(t, codel.p99, fifo.p99/2, "the overload mode's p99 against arrival order's")
}

// report formats the results as the table docs/overload.md quotes.
func report(unloaded summary, results []summary, alone map[string]summary, trials int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "backend: %d slots of %v (%.0f requests a second); client timeout %v; half critical, half sheddable\n",
		capacity, service, perSecond, clientTimeout)
	fmt.Fprintf(&b, "trials: %d a cell, each from arrivals of its own; counts and latencies pooled over them\n", trials)
	fmt.Fprintf(&b, "unloaded p99 (0.5x, gate-codel): %.1f ms; target for the overload mode: at most %.1f ms\n\n",
		ms(unloaded.p99), 2*ms(unloaded.p99))
	fmt.Fprintf(&b, "%-10s %-22s %9s %9s %13s %9s %8s %8s %8s %8s %6s %6s %5s\n",
		"layer", "load", "crit/s", "vs alone", "trials", "shed/s", "p50 ms", "p99 ms", "crit p99", "shed p99", "shed", "t/o", "max")
	for _, s := range results {
		ratio, spread := "-", "-"
		if a, ok := alone[s.layer+s.load]; ok && a.goodput[critical] > 0 {
			ratio = fmt.Sprintf("%.3f", s.goodput[critical]/a.goodput[critical])
			spread = fmt.Sprintf("%.3f-%.3f", s.ratioLo, s.ratioHi)
		}
		fmt.Fprintf(&b, "%-10s %-22s %9.1f %9s %13s %9.1f %8.1f %8.1f %8.1f %8.1f %6d %6d %5d\n",
			s.layer, s.load, s.goodput[critical], ratio, spread, s.goodput[sheddable], ms(s.p50), ms(s.p99),
			ms(s.p99ByClass[critical]), ms(s.p99ByClass[sheddable]),
			s.shed[critical]+s.shed[sheddable], s.timeout[critical]+s.timeout[sheddable], s.maxInFlight)
	}
	b.WriteString("\ncrit/s, shed/s: requests served a second, critical and sheddable; vs alone: critical goodput against the runs of\n" +
		"the same critical arrivals alone, pooled; trials: the lowest and highest trial's; p50, p99: latency of the requests\n" +
		"served; shed: refused (503); t/o: timed out at the client (both summed over the trials); max: the most requests the\n" +
		"backend was given at once (its own record; its capacity is 8)\n")
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
