package wire

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/atomicsem/atomicsem/adaptive"
)

// Phase is a stretch of a scenario: the load its clients offer and how the
// backend serves it. The zero values of the fields after Rate describe a
// healthy backend and patient clients.
type Phase struct {
	// Name says what the phase is ("healthy", "failure", "recovery", ...).
	Name     string
	Duration time.Duration
	// Rate is the requests a second that the clients send, whether or not
	// earlier ones have been answered (an open loop).
	Rate float64

	// Fault is what goes wrong with the backend.
	Fault Fault
	// Latency multiplies the backend's service time; 0 means 1.
	Latency float64
	// Errors is the share of requests the backend answers with Error at
	// once, without a worker.
	Errors float64
	// Slow is the share of requests that take SlowTime instead of the
	// service time.
	Slow     float64
	SlowTime time.Duration

	// Cancel is the share of clients that cancel their request
	// CancelAfter after sending it (context.WithCancel).
	Cancel      float64
	CancelAfter time.Duration
	// Deadline is the share of clients whose request has a deadline of
	// DeadlineAfter instead of the scenario's Timeout
	// (context.WithTimeout).
	Deadline      float64
	DeadlineAfter time.Duration
}

// Fault is a failure of the backend.
type Fault uint8

const (
	// Healthy is a backend that works as NewBackend describes.
	Healthy Fault = iota
	// FailFast answers every request Overloaded at once.
	FailFast
	// Hang answers nothing: every request waits until its client gives
	// up (its timeout, deadline or cancellation).
	Hang
	// HangDeadline answers every request Overloaded after the backend's
	// queue timeout, without a worker: a backend that hangs until its own
	// deadline.
	HangDeadline
	// Instant answers every request OK at once, without a worker.
	Instant
)

// TraceEvery is how often a run reads each limiter's limit.
const TraceEvery = 10 * time.Millisecond

// Point is a limiter's limit at a time from the start of the run.
type Point struct {
	At    time.Duration
	Limit int64
}

// PhaseResult is what one phase measured of one limiter. Requests belong
// to the phase in which their clients sent them.
type PhaseResult struct {
	Phase
	// Start is when the phase began, from the start of the run.
	Start time.Duration
	// Answers counts the phase's requests by how they ended (indexed by
	// Answer).
	Answers [answers]int
	// Goodput is the OK answers a second.
	Goodput float64
	// P50 and P99 are quantiles of the OK answers' latency, as their
	// clients measured it.
	P50, P99 time.Duration
	// Low, High and Mean describe the limit through the phase, and Last
	// is the limit at its end.
	Low, High, Last int64
	Mean            float64
	// Succeeded, Dropped and Ignored count the outcomes the limiter
	// recorded during the phase.
	Succeeded, Dropped, Ignored uint64
}

// request is one request of a run, as its client saw it.
type request struct {
	sent    time.Duration // from the start of the run
	latency time.Duration
	answer  Answer
}

// lane is one limiter of a run, with its own backend and stack.
type lane struct {
	lim     *adaptive.Limiter
	backend *Backend
	client  Client
	stop    func()

	mu       sync.Mutex
	requests []request
	trace    []Point
	phases   []PhaseResult
}

// hold is a Controller that keeps the limit where it is: the reference's,
// whose bounds pin it anyway.
type hold struct{}

func (hold) Next(limit float64, _ adaptive.Sample) float64 { return limit }

func newLane(s Scenario, n Network, stack Stack, ctrl adaptive.Controller, min, max, initial int) *lane {
	lim, err := adaptive.New(ctrl, adaptive.WithLimits(int64(initial), int64(min), int64(max)))
	if err != nil {
		panic("wire: " + err.Error())
	}
	l := &lane{lim: lim, backend: NewBackend(s.Workers, s.ServiceTime, s.QueueTimeout)}
	l.client, l.stop = stack.Start(n, lim, l.backend)
	return l
}

// send makes one request and records it.
func (l *lane) send(ctx context.Context, start time.Time) {
	sent := time.Now()
	a := l.client(ctx)
	r := request{sent: sent.Sub(start), latency: time.Since(sent), answer: a}
	l.mu.Lock()
	l.requests = append(l.requests, r)
	l.mu.Unlock()
}

// run drives both lanes through s's phases with the same arrivals, and
// returns once every request has ended.
func run(s Scenario, lanes ...*lane) {
	start := time.Now()
	stopTrace := make(chan struct{})
	traced := make(chan struct{})
	go func() {
		defer close(traced)
		t := time.NewTicker(TraceEvery)
		defer t.Stop()
		for {
			at := time.Since(start)
			for _, l := range lanes {
				l.trace = append(l.trace, Point{at, l.lim.Stats().Limit})
			}
			select {
			case <-t.C:
			case <-stopTrace:
				return
			}
		}
	}()

	rng := rand.New(rand.NewPCG(1, 2))
	var wg sync.WaitGroup
	var at time.Duration
	for _, ph := range s.Phases {
		for _, l := range lanes {
			l.backend.Set(ph)
			st := l.lim.Stats()
			l.phases = append(l.phases, PhaseResult{Phase: ph, Start: at,
				Succeeded: st.Succeeded, Dropped: st.Dropped, Ignored: st.Ignored})
		}
		end := at + ph.Duration
		sent := 0
		for now := time.Since(start); now < end; now = time.Since(start) {
			due := int(ph.Rate * (now - at).Seconds())
			for ; sent < due; sent++ {
				timeout, cancelAfter := s.Timeout, time.Duration(0)
				switch u := rng.Float64(); {
				case u < ph.Cancel:
					cancelAfter = ph.CancelAfter
				case u < ph.Cancel+ph.Deadline:
					timeout = ph.DeadlineAfter
				}
				for _, l := range lanes {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ctx, cancel := context.WithTimeout(context.Background(), timeout)
						defer cancel()
						if cancelAfter > 0 {
							t := time.AfterFunc(cancelAfter, cancel)
							defer t.Stop()
						}
						l.send(ctx, start)
					}()
				}
			}
			time.Sleep(time.Millisecond)
		}
		at = end
	}
	wg.Wait()
	close(stopTrace)
	<-traced
	for _, l := range lanes {
		st := l.lim.Stats()
		for i := range l.phases {
			next := [3]uint64{st.Succeeded, st.Dropped, st.Ignored}
			if i+1 < len(l.phases) {
				n := l.phases[i+1]
				next = [3]uint64{n.Succeeded, n.Dropped, n.Ignored}
			}
			p := &l.phases[i]
			p.Succeeded, p.Dropped, p.Ignored = next[0]-p.Succeeded, next[1]-p.Dropped, next[2]-p.Ignored
		}
		for i := range l.phases {
			p := &l.phases[i]
			l.summarise(p, p.Start, p.Start+p.Duration)
		}
	}
}

// summarise fills in p's figures from the requests sent in [from, to) and
// the limit through that stretch.
func (l *lane) summarise(p *PhaseResult, from, to time.Duration) {
	var ok []time.Duration
	for _, r := range l.requests {
		if r.sent < from || r.sent >= to {
			continue
		}
		p.Answers[r.answer]++
		if r.answer == OK {
			ok = append(ok, r.latency)
		}
	}
	p.Goodput = float64(len(ok)) / (to - from).Seconds()
	p.P50, p.P99 = quantile(ok, 0.5), quantile(ok, 0.99)
	p.Low, p.High, p.Mean, p.Last = l.limits(from, to)
}

// goodput returns the OK answers a second of the requests sent in
// [from, to).
func (l *lane) goodput(from, to time.Duration) float64 {
	n := 0
	for _, r := range l.requests {
		if r.sent >= from && r.sent < to && r.answer == OK {
			n++
		}
	}
	return float64(n) / (to - from).Seconds()
}

// count returns how many of the requests sent in [from, to) ended with a.
func (l *lane) count(a Answer, from, to time.Duration) int {
	n := 0
	for _, r := range l.requests {
		if r.sent >= from && r.sent < to && r.answer == a {
			n++
		}
	}
	return n
}

// p99 returns the 99th percentile of the latency of the OK answers to the
// requests sent in [from, to).
func (l *lane) p99(from, to time.Duration) time.Duration {
	var ok []time.Duration
	for _, r := range l.requests {
		if r.sent >= from && r.sent < to && r.answer == OK {
			ok = append(ok, r.latency)
		}
	}
	return quantile(ok, 0.99)
}

// limits returns the lowest, highest, mean and last limit traced in
// [from, to), with the limit in force at from counted.
func (l *lane) limits(from, to time.Duration) (low, high int64, mean float64, last int64) {
	low, high = math.MaxInt64, 0
	var sum float64
	n := 0
	for i, p := range l.trace {
		inForce := p.At < from && (i+1 == len(l.trace) || l.trace[i+1].At >= from)
		if !inForce && (p.At < from || p.At >= to) {
			continue
		}
		low, high = min(low, p.Limit), max(high, p.Limit)
		sum += float64(p.Limit)
		n++
		last = p.Limit
	}
	if n == 0 {
		return 0, 0, 0, 0
	}
	return low, high, sum / float64(n), last
}

// variation returns the standard deviation of the limits traced in
// [from, to) over their mean: 0 for a limit that holds, more the more it
// swings.
func (l *lane) variation(from, to time.Duration) float64 {
	var n, sum, sq float64
	for _, p := range l.trace {
		if p.At >= from && p.At < to {
			v := float64(p.Limit)
			n, sum, sq = n+1, sum+v, sq+v*v
		}
	}
	if n == 0 || sum == 0 {
		return 0
	}
	mean := sum / n
	return math.Sqrt(max(0, sq/n-mean*mean)) / mean
}

// reach returns the time from from at which the limit first satisfied ok
// within [from, to), or -1 if it did not.
func (l *lane) reach(from, to time.Duration, ok func(int64) bool) time.Duration {
	for _, p := range l.trace {
		if p.At >= from && p.At < to && ok(p.Limit) {
			return p.At - from
		}
	}
	return -1
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[int(math.Ceil(q*float64(len(d))))-1]
}
