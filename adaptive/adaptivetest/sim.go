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
	"math/rand/v2"
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
	// it is dropped: the server's deadline. 0 means 5 × ServiceTime.
	Timeout time.Duration
	// Tick is the simulation's step; arrivals, completions and drops are
	// handled at the end of each. 0 means 1 ms.
	Tick time.Duration
	// Phases run one after the other.
	Phases []Phase
}

// Phase is a stretch of the simulation with a fixed capacity and load, and
// what, if anything, goes wrong in it. The zero values of the fields after
// Offered describe a healthy service.
type Phase struct {
	Duration time.Duration
	Capacity int     // workers
	Offered  float64 // arrivals, as a multiple of what Capacity workers complete

	// Fault is what goes wrong with the service in this phase.
	Fault Fault
	// Latency multiplies the service time (a latency spike); 0 means 1.
	Latency float64
	// Slow is the share of requests, drawn at random with a fixed seed,
	// that take SlowTime instead of the service time (bimodal latency).
	Slow     float64
	SlowTime time.Duration
	// Cancel is the share of requests, drawn at random with a fixed seed,
	// whose client gives up CancelAfter after the request arrived: the
	// request leaves the queue or its worker then, and ends with Ignored
	// if the Request is an Ignorer, Dropped otherwise.
	Cancel      float64
	CancelAfter time.Duration
}

// Fault is a failure of the simulated service.
type Fault uint8

const (
	// Healthy is a service that works as modelled.
	Healthy Fault = iota
	// FailFast is a service that answers every request with an error
	// (a 503 from a downstream that is down) FailFastTime after it
	// arrives, without queueing: each ends Dropped.
	FailFast
	// Hang is a service that stops answering: every request waits,
	// without a worker, until the server's deadline (Config.Timeout) cuts
	// it, and ends Dropped.
	Hang
	// Instant is a service faster than the clock can resolve: every
	// request that a worker takes completes within the same tick, so its
	// measured RTT is 0. Arrivals are Offered × Capacity a tick, and the
	// Capacity workers take at most Capacity requests a tick.
	Instant
)

// FailFastTime is how long a FailFast service takes to fail a request.
const FailFastTime = time.Millisecond

// PhaseResult is what one phase measured.
type PhaseResult struct {
	Phase
	// Samples is the number of requests that ended completed or dropped
	// in the phase: the samples the limiter saw.
	Samples int
	// Settle is the number of samples, counted from the start of the phase,
	// after which the limit stayed within ±25 % of Capacity to the end of
	// the phase; -1 if it was outside that band at the end.
	Settle int
	// SettleTime is Settle as the time from the start of the phase; -1 if
	// it was outside the band at the end.
	SettleTime time.Duration
	// Low and High are the lowest and highest limit of the whole phase,
	// and Last the limit at its end.
	Low, High, Last int
	// Ignored counts the requests whose clients cancelled in the phase.
	Ignored int
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
	svc     time.Duration // its service time
	cancel  time.Time     // when its client gives up; zero for never
	done    time.Time     // when its service (or failure) ends; zero while queued
}

// Run drives lim through cfg's phases and returns what each measured.
// It must run in a testing/synctest bubble (or be willing to take the
// phases' durations in real time).
func Run(lim Limiter, cfg Config) []PhaseResult {
	svc := orDur(cfg.ServiceTime, 20*time.Millisecond)
	timeout := orDur(cfg.Timeout, 5*svc)
	tick := orDur(cfg.Tick, time.Millisecond)
	rng := rand.New(rand.NewPCG(1, 2))

	var (
		queue   []request // FIFO: waiting for a worker
		busy    []request // in service, in the order they were taken
		failing []request // of a FailFast or Hang phase, to end Dropped at done
		credit  float64   // arrivals owed, fractional
		results []PhaseResult
	)
	for _, ph := range cfg.Phases {
		res := PhaseResult{Phase: ph, Settle: 0, MinLimit: math.MaxInt, Low: math.MaxInt}
		own := time.Duration(float64(svc) * orOne(ph.Latency)) // this phase's service time
		mean := float64(own)*(1-ph.Slow) + float64(ph.SlowTime)*ph.Slow
		rate := ph.Offered * float64(ph.Capacity) * float64(tick) / mean // arrivals a tick
		if ph.Fault == Instant {
			rate = ph.Offered * float64(ph.Capacity)
		}
		start := time.Now()
		half := start.Add(ph.Duration / 2)
		var lat []time.Duration
		var limitSum, limitN float64
		nextTrace := start
		cancelled := func(r Request) {
			if ig, ok := r.(Ignorer); ok {
				ig.Ignored()
			} else {
				r.Dropped()
			}
			res.Ignored++
		}
		// complete ends the requests in service whose time is up, and those
		// whose clients gave up.
		complete := func(now time.Time, second bool) {
			kept := busy[:0]
			for _, rq := range busy {
				switch {
				case !rq.cancel.IsZero() && !rq.cancel.After(now) && rq.cancel.Before(rq.done):
					cancelled(rq.r)
				case !rq.done.After(now):
					rq.r.Success()
					res.Samples++
					if second {
						lat = append(lat, now.Sub(rq.arrived))
					}
				default:
					kept = append(kept, rq)
				}
			}
			clear(busy[len(kept):])
			busy = kept
		}
		for now := start; now.Sub(start) < ph.Duration; now = time.Now() {
			second := !now.Before(half)
			complete(now, second)
			// Failures due, and clients that gave up on them.
			kept := failing[:0]
			for _, rq := range failing {
				switch {
				case !rq.cancel.IsZero() && !rq.cancel.After(now) && rq.cancel.Before(rq.done):
					cancelled(rq.r)
				case !rq.done.After(now):
					rq.r.Dropped()
					res.Samples++
					if second {
						res.Dropped++
					}
				default:
					kept = append(kept, rq)
				}
			}
			clear(failing[len(kept):])
			failing = kept
			// Clients that gave up while queued.
			if ph.Cancel > 0 {
				kept := queue[:0]
				for _, rq := range queue {
					if !rq.cancel.IsZero() && !rq.cancel.After(now) {
						cancelled(rq.r)
						continue
					}
					kept = append(kept, rq)
				}
				clear(queue[len(kept):])
				queue = kept
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
				rq := request{r: r, arrived: now, svc: own}
				if ph.Slow > 0 && rng.Float64() < ph.Slow {
					rq.svc = ph.SlowTime
				}
				if ph.Cancel > 0 && rng.Float64() < ph.Cancel {
					rq.cancel = now.Add(ph.CancelAfter)
				}
				switch ph.Fault {
				case FailFast:
					rq.done = now.Add(FailFastTime)
					failing = append(failing, rq)
				case Hang:
					rq.done = now.Add(timeout)
					failing = append(failing, rq)
				default:
					queue = append(queue, rq)
				}
			}
			// Workers take from the queue.
			for len(busy) < ph.Capacity && len(queue) > 0 {
				rq := queue[0]
				queue = queue[1:]
				rq.done = now.Add(rq.svc)
				if ph.Fault == Instant {
					rq.done = now
				}
				busy = append(busy, rq)
			}
			if ph.Fault == Instant {
				complete(now, second)
			}

			l := lim.Limit()
			if l < ph.Capacity*3/4 || l > ph.Capacity*5/4 {
				res.Settle = res.Samples
				res.SettleTime = now.Sub(start) + tick
			}
			res.Low, res.High = min(res.Low, l), max(res.High, l)
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
			res.Settle, res.SettleTime = -1, -1
		}
		res.Last = l
		secs := float64(ph.Duration-ph.Duration/2) / mean
		if ph.Fault == Instant {
			secs = float64(ph.Duration-ph.Duration/2) / float64(tick)
		}
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
	for _, rq := range failing {
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

func orOne(v float64) float64 {
	if v == 0 {
		return 1
	}
	return v
}
