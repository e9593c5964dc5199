// Package adaptivetest simulates a service under load, to test adaptive
// concurrency limiters against it: this package's own, or any other that
// can be driven through the Limiter interface.
//
// The service has Capacity workers, each taking the same service time per
// request: latency is flat while at most Capacity requests are in flight and
// grows with the queue beyond that, by one service time per Capacity queued
// requests. A request still queued Timeout after its arrival is abandoned
// and reported to the limiter as dropped. Requests arrive at a steady rate,
// Offered times what the service can complete; each one the limiter does
// not admit at once is shed.
//
// Run reads the clock and sleeps, so it belongs inside a testing/synctest
// bubble, where time is fake and the run is exact and quick:
//
//	synctest.Test(t, func(t *testing.T) {
//		res := adaptivetest.Run(adaptivetest.Adapt(lim), cfg)
//		...
//	})
package adaptivetest

import (
	"math"
	"slices"
	"time"

	"github.com/atomicsem/atomicsem/adaptive"
)

// Limiter is an adaptive concurrency limiter as the simulation drives it.
type Limiter interface {
	// TryAcquire admits a request without waiting, or reports false to
	// shed it.
	TryAcquire() (Request, bool)
	// Limit returns the limit in force.
	Limit() int
}

// Request is an admitted request, ended exactly once: Success for a
// request that completed, Dropped for one that failed or timed out.
type Request interface {
	Success()
	Dropped()
}

// Ignorer is a Request that can also end without a verdict on load, as
// package adaptive's Permit.Ignored does. Run ends a request that its
// client cancels (Phase.Cancel) with Ignored when the Request has it, and
// otherwise with Dropped.
type Ignorer interface {
	Ignored()
}

// Adapt returns lim as a Limiter for Run. It allocates a Permit per
// request, which a simulation does not mind.
func Adapt(lim *adaptive.Limiter) Limiter { return limiter{lim} }

type limiter struct{ l *adaptive.Limiter }

func (a limiter) TryAcquire() (Request, bool) {
	p := new(adaptive.Permit)
	if !a.l.TryAcquire(p) {
		return nil, false
	}
	return permit{p}, true
}

// permit is a Permit as a Request and an Ignorer.
type permit struct{ p *adaptive.Permit }

func (p permit) Success() { p.p.Succeeded() }
func (p permit) Dropped() { p.p.Dropped() }
func (p permit) Ignored() { p.p.Ignored() }

func (a limiter) Limit() int { return int(a.l.Stats().Limit) }

// Config describes a simulation.
type Config struct {
	// ServiceTime is the latency of a request that does not queue: the
	// unloaded latency. 0 means 20 ms.
	ServiceTime time.Duration
	// Timeout is how long a request may wait in the service's queue before
	// it is dropped. 0 means 5 × ServiceTime.
	Timeout time.Duration
	// Tick is the simulation's step; arrivals, completions and drops are
	// handled at the end of each. 0 means 1 ms.
	Tick time.Duration
	// Phases run one after the other.
	Phases []Phase
}

// Phase is a stretch of the simulation with a fixed capacity and load.
type Phase struct {
	Duration time.Duration
	Capacity int     // workers
	Offered  float64 // arrivals, as a multiple of what Capacity workers complete
}

// PhaseResult is what one phase measured.
type PhaseResult struct {
	Phase
	// Samples is the number of requests that ended (completed or dropped)
	// in the phase: the samples the limiter saw.
	Samples int
	// Settle is the number of samples, counted from the start of the phase,
	// after which the limit stayed within ±25 % of Capacity to the end of
	// the phase; -1 if it was outside that band at the end.
	Settle int
	// The figures below cover the second half of the phase.
	Goodput            float64       // completions, as a fraction of what Capacity workers complete
	P50, P99           time.Duration // latency of completed requests
	MinLimit, MaxLimit int
	MeanLimit          float64
	Dropped, Shed      int
	// Trace is the limit at every TraceEvery of the phase.
	Trace []int
}

// TraceEvery is the spacing of the points of PhaseResult.Trace.
const TraceEvery = 20 * time.Millisecond

// request is one admitted request in the service.
type request struct {
	r       Request
	arrived time.Time
	done    time.Time // when its service ends; zero while queued
}

// Run drives lim through cfg's phases and returns what each measured.
// It must run in a testing/synctest bubble (or be willing to take the
// phases' durations in real time).
func Run(lim Limiter, cfg Config) []PhaseResult {
	svc := orDur(cfg.ServiceTime, 20*time.Millisecond)
	timeout := orDur(cfg.Timeout, 5*svc)
	tick := orDur(cfg.Tick, time.Millisecond)

	var (
		queue, busy []request // FIFO: waiting, in service (in order of ending)
		credit      float64   // arrivals owed, fractional
		results     []PhaseResult
	)
	for _, ph := range cfg.Phases {
		res := PhaseResult{Phase: ph, Settle: 0, MinLimit: math.MaxInt}
		rate := ph.Offered * float64(ph.Capacity) * float64(tick) / float64(svc) // arrivals a tick
		start := time.Now()
		half := start.Add(ph.Duration / 2)
		var lat []time.Duration
		var limitSum, limitN float64
		nextTrace := start
		for now := start; now.Sub(start) < ph.Duration; now = time.Now() {
			second := !now.Before(half)
			// Completions.
			for len(busy) > 0 && !busy[0].done.After(now) {
				rq := busy[0]
				busy = busy[1:]
				rq.r.Success()
				res.Samples++
				if second {
					lat = append(lat, now.Sub(rq.arrived))
				}
			}
			// Timeouts in the queue, which is in order of arrival.
			for len(queue) > 0 && now.Sub(queue[0].arrived) >= timeout {
				queue[0].r.Dropped()
				queue = queue[1:]
				res.Samples++
				if second {
					res.Dropped++
				}
			}
			// Arrivals.
			credit += rate
			for ; credit >= 1; credit-- {
				r, ok := lim.TryAcquire()
				if !ok {
					if second {
						res.Shed++
					}
					continue
				}
				queue = append(queue, request{r: r, arrived: now})
			}
			// Workers take from the queue.
			for len(busy) < ph.Capacity && len(queue) > 0 {
				rq := queue[0]
				queue = queue[1:]
				rq.done = now.Add(svc)
				busy = append(busy, rq)
			}

			l := lim.Limit()
			if l < ph.Capacity*3/4 || l > ph.Capacity*5/4 {
				res.Settle = res.Samples
			}
			if second {
				res.MinLimit = min(res.MinLimit, l)
				res.MaxLimit = max(res.MaxLimit, l)
				limitSum += float64(l)
				limitN++
			}
			if !now.Before(nextTrace) {
				res.Trace = append(res.Trace, l)
				nextTrace = nextTrace.Add(TraceEvery)
			}
			time.Sleep(tick)
		}
		l := lim.Limit()
		if l < ph.Capacity*3/4 || l > ph.Capacity*5/4 {
			res.Settle = -1
		}
		secs := float64(ph.Duration-ph.Duration/2) / float64(svc)
		res.Goodput = float64(len(lat)) / (secs * float64(ph.Capacity))
		res.P50, res.P99 = quantile(lat, 0.5), quantile(lat, 0.99)
		if limitN > 0 {
			res.MeanLimit = limitSum / limitN
		}
		results = append(results, res)
	}
	// Let what is still in the service finish, so that no permit is left
	// out.
	for _, rq := range busy {
		rq.r.Success()
	}
	for _, rq := range queue {
		rq.r.Dropped()
	}
	return results
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[int(math.Ceil(q*float64(len(d))))-1]
}

func orDur(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
