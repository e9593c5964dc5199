package adaptive

import (
	"context"
	"fmt"
	"net/http"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/overload"
)

// WithGate makes the Limiter enforce its limit with g, a priority gate, in
// place of a semaphore of its own: each request is admitted through g for
// one permit of its class, and every limit the controller decides becomes
// g's limit (Gate.SetLimit), so that the classes share the limit the
// controller moves, with their guaranteed shares, their ceilings and, for
// Acquire, g's queue discipline.
//
// A request's class is the one its context carries (overload.ContextWithClass;
// Acquire and TryAcquireContext), compared without regard to case; a
// request without one, or with one g does not have, and every TryAcquire,
// is of g's lowest class. Handler takes the class from the request's
// overload.DefaultClassHeader field, or its context, and the gRPC server
// interceptors from the RPC's metadata.
//
// New sets g's limit to the initial limit, and fails with ErrInvalidLimits
// if the maximum limit is above g's maximum or with WithSemaphoreOptions,
// which apply to the semaphore g replaces, and with ErrClosed for a closed
// g. From then on the Limiter moves g's limit and Close closes g: give g
// to one Limiter, and do not call g.SetLimit or g.Close yourself. Acquire
// may return g's sheds (overload.ErrShed: a full queue, the maximum wait,
// the overload mode, a deadline before the expected wait), and
// Stats.Rejected counts the requests TryAcquire found no permit for. It is
// a run-time error to pass a nil g.
func WithGate(g *overload.Gate) Option {
	if g == nil {
		panic("adaptive: WithGate: nil Gate")
	}
	return func(c *config) { c.gate = g }
}

// newGated returns a Limiter on cfg.gate, whose bounds New has checked.
func newGated(ctrl Controller, cfg config) (*Limiter, error) {
	g := cfg.gate
	if len(cfg.semOpts) > 0 {
		return nil, fmt.Errorf("%w: WithSemaphoreOptions with WithGate, which has no semaphore", ErrInvalidLimits)
	}
	if m := g.Stats().Max; cfg.max > m {
		return nil, fmt.Errorf("%w: max %d above the gate's maximum %d", ErrInvalidLimits, cfg.max, m)
	}
	if err := g.SetLimit(cfg.initial); err != nil {
		return nil, err
	}
	return newLimiter(ctrl, cfg, nil, g), nil
}

// TryAcquireContext is TryAcquire for a request of the class ctx carries
// (overload.ClassFromContext) on a Limiter made WithGate; without a gate it
// is TryAcquire, and ctx is not consulted. It is a run-time error to pass a
// nil ctx.
func (l *Limiter) TryAcquireContext(ctx context.Context, p *Permit) bool {
	if ctx == nil {
		panic("adaptive: Limiter.TryAcquireContext: nil ctx")
	}
	l.mustExist()
	if l.gate == nil {
		return l.TryAcquire(p)
	}
	p.mustBeFree()
	return l.tryAcquireGate(l.classOf(ctx), p)
}

// classOf returns the index in l.gate of the class ctx carries, or of the
// lowest class.
func (l *Limiter) classOf(ctx context.Context) int {
	if name, ok := overload.ClassFromContext(ctx); ok {
		if c, ok := l.gate.Class(name); ok {
			return c
		}
	}
	return l.gate.Classes() - 1
}

// tryAcquireGate is TryAcquire on l.gate for class c.
func (l *Limiter) tryAcquireGate(c int, p *Permit) bool {
	var ok bool
	if p.tok, ok = l.gate.TryAcquire(c, 1); !ok {
		l.rejected.Add(1)
		l.turnedAway.Add(1)
		return false
	}
	l.admit(p)
	return true
}

// acquireGate is Acquire on l.gate, for the class ctx carries.
func (l *Limiter) acquireGate(ctx context.Context, p *Permit) error {
	c := l.classOf(ctx)
	var ok bool
	if p.tok, ok = l.gate.TryAcquire(c, 1); !ok {
		l.turnedAway.Add(1)
		var err error
		if p.tok, err = l.gate.Acquire(ctx, c, 1); err != nil {
			return err
		}
	}
	l.admit(p)
	return nil
}

// setLimit moves the limit that admits the requests.
func (l *Limiter) setLimit(n int64) error {
	if l.gate != nil {
		return l.gate.SetLimit(n)
	}
	return l.sem.SetLimit(n)
}

// limitStats returns the part of Stats the limit that admits the requests
// knows.
func (l *Limiter) limitStats() atomicsem.Stats {
	if l.gate != nil {
		g := l.gate.Stats()
		return atomicsem.Stats{Limit: g.Limit, Held: g.Held, Waiters: g.Waiters, Closed: g.Closed}
	}
	return l.sem.Stats()
}

// closeLimit closes the limit that admits the requests.
func (l *Limiter) closeLimit() {
	if l.gate != nil {
		l.gate.Close()
		return
	}
	l.sem.Close()
}

// tryAcquireRequest is Handler's TryAcquire: for r's class with a gate,
// taken from r's context or else its class header, and then returns r with
// the class in its context.
func (l *Limiter) tryAcquireRequest(r *http.Request, p *Permit) (*http.Request, bool) {
	if l.gate == nil {
		return r, l.TryAcquire(p)
	}
	ctx := r.Context()
	if _, ok := overload.ClassFromContext(ctx); !ok {
		if name := r.Header.Get(overload.DefaultClassHeader); name != "" {
			ctx = overload.ContextWithClass(ctx, name)
			r = r.WithContext(ctx)
		}
	}
	return r, l.TryAcquireContext(ctx, p)
}
