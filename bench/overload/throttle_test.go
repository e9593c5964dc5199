package overloadbench_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/overload"
)

var throttleOut = flag.String("overload.throttleout", "", "write the table of the client throttle experiment to this file")

// clients is how many clients share the offered load, each with a
// Transport (and, throttled, a Throttle) of its own, as a fleet's
// processes have.
const clients = 8

// throttleWindow is the Throttle's window in the experiment: the SRE
// book's two minutes would be longer than a run, so that its counts would
// never slide; ten seconds hold a whole run.
const throttleWindow = 10 * time.Second

// throttleRun is what one run of the client throttle experiment shows, over
// the requests that arrived in the measured stretch.
type throttleRun struct {
	name                                  string
	offered, sent, served, rejected, held float64 // a second
	p99                                   time.Duration
}

// runThrottled offers arrs to the backend behind adaptive.Handler at the
// backend's capacity (a fixed limit: what it cannot take it answers 503 at
// once) from the clients, each a Transport whose Limiter never binds, with
// a Throttle of K k when k > 0. It counts, by the server's own record,
// the requests that reached it and those it rejected, and by the clients'
// the requests refused locally.
func runThrottled(t *testing.T, name string, k float64, arrs []arrival, warmup, measure time.Duration) throttleRun {
	be := newBackend()
	lim, err := adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(capacity, capacity, capacity))
	require.NoError(t, err)
	defer lim.Close()
	var mu sync.Mutex
	reached := map[int]bool{} // arrival index -> reached the server, by its record
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var i int
		_, _ = fmt.Sscan(r.URL.Query().Get("i"), &i)
		mu.Lock()
		reached[i] = true
		mu.Unlock()
		adaptive.Handler(lim, be).ServeHTTP(w, r)
	}))
	base := &http.Transport{MaxIdleConnsPerHost: 4096, MaxIdleConns: 4096}
	defer func() {
		base.CloseIdleConnections()
		srv.Close()
	}()
	var trs [clients]*http.Client
	for c := range trs {
		climit, err := adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(100000, 100000, 100000))
		require.NoError(t, err)
		defer climit.Close()
		tr := &adaptive.Transport{Limiter: climit, Base: base}
		if k > 0 {
			tr.Throttle, err = overload.NewThrottle(k, throttleWindow)
			require.NoError(t, err)
		}
		trs[c] = &http.Client{Transport: tr}
	}
	recs := make([]record, len(arrs))
	var wg sync.WaitGroup
	begin := time.Now()
	for i, a := range arrs {
		if d := a.at - time.Since(begin); d > 0 {
			time.Sleep(d)
		}
		wg.Go(func() { recs[i] = doThrottled(trs[i%clients], fmt.Sprintf("%s?i=%d", srv.URL, i), a) })
	}
	wg.Wait()

	r := throttleRun{name: name}
	var lat []time.Duration
	for i, rec := range recs {
		if rec.at < warmup || rec.at >= warmup+measure {
			continue
		}
		r.offered++
		if reached[i] {
			r.sent++
		}
		switch rec.outcome {
		case served:
			r.served++
			lat = append(lat, rec.latency)
		case shed:
			r.rejected++
		case failed: // refused locally
			r.held++
		}
	}
	for _, f := range []*float64{&r.offered, &r.sent, &r.served, &r.rejected, &r.held} {
		*f /= measure.Seconds()
	}
	r.p99 = quantile(lat, 0.99)
	return r
}

// doThrottled is do for a client whose Transport may refuse locally, which
// it records as failed.
func doThrottled(client *http.Client, url string, a arrival) record {
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		panic(err)
	}
	start := time.Now()
	resp, err := client.Do(req)
	r := record{arrival: a}
	switch {
	case errors.Is(err, adaptive.ErrLimited):
		r.outcome = failed
	case errors.Is(err, context.DeadlineExceeded):
		r.outcome = timedOut
	case err != nil:
		panic(err)
	default:
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		r.outcome = shed
		if resp.StatusCode == http.StatusOK {
			r.outcome = served
		}
	}
	r.latency = time.Since(start)
	return r
}

// TestClientThrottleExperiment offers the backend (8 slots of 100 ms: 80
// requests a second), behind adaptive.Handler at its capacity, four times
// what it can serve, from eight clients, with and without
// adaptive.Transport's Throttle (K = 2, and K = 1.1): the throttle should
// keep the goodput while the server answers far fewer rejections, about
// K times what it accepts reaching it.
//
// It runs with -overload.experiment only; the short version (runs of 2 s)
// checks, with margins for a loaded machine, that the throttled clients
// send the server at most two thirds of what the others send and keep
// three quarters of their goodput. -overload.long runs six seconds a run.
func TestClientThrottleExperiment(t *testing.T) {
	if !*experiment {
		t.Skip("a real-time experiment: run it with -overload.experiment (bench/run.sh overload does)")
	}
	if raceEnabled {
		t.Skip("a real-time experiment: under the race detector its figures mean nothing")
	}
	warmup, measure := 500*time.Millisecond, 1500*time.Millisecond
	if *long {
		warmup, measure = time.Second, 5*time.Second
	}
	arrs := schedule(40, 4*perSecond, warmup+measure)
	runs := []throttleRun{
		runThrottled(t, "no throttle", 0, arrs, warmup, measure),
		runThrottled(t, "throttle K=2", 2, arrs, warmup, measure),
		runThrottled(t, "throttle K=1.1", 1.1, arrs, warmup, measure),
	}
	var b strings.Builder
	fmt.Fprintf(&b, "client throttle: backend of %d slots of %v (%.0f requests a second) behind adaptive.Handler at its capacity; %d clients offer 4x\n\n",
		capacity, service, perSecond, clients)
	fmt.Fprintf(&b, "%-15s %9s %9s %9s %10s %10s %12s %8s\n", "clients", "offered/s", "sent/s", "served/s", "rejected/s", "refused/s", "rejected/sent", "p99 ms")
	for _, r := range runs {
		fmt.Fprintf(&b, "%-15s %9.1f %9.1f %9.1f %10.1f %10.1f %12.3f %8.1f\n",
			r.name, r.offered, r.sent, r.served, r.rejected, r.held, r.rejected/max(r.sent, 1), ms(r.p99))
	}
	b.WriteString("\nsent: requests that reached the server (its own record); served: answered 200; rejected: answered 503 by the\n" +
		"server, the work it spends on refusals; refused: rejected by the client's Throttle before the network\n")
	t.Log("\n" + b.String())
	if *throttleOut != "" {
		require.NoError(t, os.WriteFile(*throttleOut, []byte(b.String()), 0o644))
	}
	if *long {
		return
	}
	plain, k2 := runs[0], runs[1]
	require.Less(t, k2.sent, plain.sent*2/3, "the throttled clients send the server less")
	require.GreaterOrEqual(t, k2.served, 0.75*plain.served, "and keep most of their goodput")
}
