package adaptivebench_test

import (
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptive/adaptivetest"
)

// peer is a limiter under comparison: a name, and how to build one with the
// given bounds, as the simulation drives it and as the benchmarks do. The
// simulation passes typical, the latency of the service's typical request
// without a queue, for a controller whose settings depend on it (AIMD's
// Timeout); the others ignore it.
type peer struct {
	name  string
	sim   func(typical time.Duration, min, max, initial int) adaptivetest.Limiter
	bench func(min, max, initial int) admitter
}

// simFor returns p's simulated limiter for a service whose typical request
// takes typical without a queue, in the form adaptivetest runs.
func (p peer) simFor(typical time.Duration) func(min, max, initial int) adaptivetest.Limiter {
	return func(min, max, initial int) adaptivetest.Limiter { return p.sim(typical, min, max, initial) }
}

// admitter is what the overhead benchmarks call: admit one request, record
// it as a success, and report whether it was admitted. Every limiter is
// called through it, so the dynamic call costs the same in every column.
type admitter interface {
	admitRecord() bool
}

func ours(name string, ctrl func(typical time.Duration) adaptive.Controller) peer {
	build := func(typical time.Duration, min, max, initial int) *adaptive.Limiter {
		lim, err := adaptive.New(ctrl(typical), adaptive.WithLimits(int64(initial), int64(min), int64(max)))
		if err != nil {
			panic(err)
		}
		return lim
	}
	return peer{
		name: name,
		sim: func(typical time.Duration, min, max, initial int) adaptivetest.Limiter {
			return adaptivetest.Adapt(build(typical, min, max, initial))
		},
		bench: func(min, max, initial int) admitter {
			return oursAdmitter{build(adaptivetest.ServiceTime, min, max, initial)}
		},
	}
}

type oursAdmitter struct{ l *adaptive.Limiter }

func (a oursAdmitter) admitRecord() bool {
	var p adaptive.Permit
	if !a.l.TryAcquire(&p) {
		return false
	}
	p.Succeeded()
	return true
}

// failsafe builds failsafe-go's AdaptiveLimiter with the given bounds and
// recent window (its defaults are 1 s to 30 s and 50 samples; zero keeps
// them).
func failsafe(name string, window time.Duration) peer {
	build := func(min, max, initial int) adaptivelimiter.AdaptiveLimiter[any] {
		b := adaptivelimiter.NewBuilder[any]().WithLimits(uint(min), uint(max), uint(initial))
		if window != 0 {
			b = b.WithRecentWindow(window, 30*time.Second, 50)
		}
		return b.Build()
	}
	return peer{
		name: name,
		sim: func(_ time.Duration, min, max, initial int) adaptivetest.Limiter {
			return failsafeSim{build(min, max, initial)}
		},
		bench: func(min, max, initial int) admitter { return failsafeAdmitter{build(min, max, initial)} },
	}
}

type failsafeSim struct {
	l adaptivelimiter.AdaptiveLimiter[any]
}

func (f failsafeSim) TryAcquire() (adaptivetest.Request, bool) {
	p, ok := f.l.TryAcquirePermit()
	if !ok {
		return nil, false
	}
	return failsafeRequest{p}, true
}

func (f failsafeSim) Limit() int { return f.l.Limit() }

// failsafeRequest ends a failsafe-go permit. A drop is Drop, which
// failsafe-go documents for executions that end prematurely, such as by a
// timeout: it frees the permit without a sample. A request whose client
// cancelled ends the same way, failsafe-go having no other.
type failsafeRequest struct{ p adaptivelimiter.Permit }

func (r failsafeRequest) Success() { r.p.Record() }
func (r failsafeRequest) Dropped() { r.p.Drop() }
func (r failsafeRequest) Ignored() { r.p.Drop() }

type failsafeAdmitter struct {
	l adaptivelimiter.AdaptiveLimiter[any]
}

func (a failsafeAdmitter) admitRecord() bool {
	p, ok := a.l.TryAcquirePermit()
	if !ok {
		return false
	}
	p.Record()
	return true
}

// peers are the limiters compared, this package's controllers first.
var peers = []peer{
	ours("adaptive-aimd", aimdTimeout(1.1)),
	ours("adaptive-vegas", func(time.Duration) adaptive.Controller { return &adaptive.Vegas{} }),
	ours("adaptive-gradient2", func(time.Duration) adaptive.Controller { return &adaptive.Gradient2{} }),
	failsafe("failsafe", 0),
	failsafe("failsafe-100ms", 100*time.Millisecond),
}

// aimdTimeout returns AIMD with its Timeout at margin times the typical
// request's latency; its documentation recommends a margin of 1.1.
func aimdTimeout(margin float64) func(typical time.Duration) adaptive.Controller {
	return func(typical time.Duration) adaptive.Controller {
		return &adaptive.AIMD{Timeout: time.Duration(margin * float64(typical))}
	}
}
