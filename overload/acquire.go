package overload

import (
	"context"
	"fmt"
	"time"

	"github.com/atomicsem/atomicsem/internal/hook"
	"github.com/atomicsem/atomicsem/token"
)

// Acquire blocks until n permits of class c are granted, then returns a
// token holding them; Release gives them back. Acquiring 0 permits succeeds
// at once with a token for nothing, unless the gate is closed.
//
// On failure Acquire returns the zero Token, holds nothing, and returns:
//   - ErrInvalidPermits (wrapped) if n < 0 or n > MaxPermits(Classes());
//   - ErrExceedsMax (wrapped) if class c could never hold n permits: n is
//     above its ceiling at the gate's maximum limit;
//   - ctx.Err() if ctx is done before the permits are granted, even if
//     they were granted to it after ctx was done but before it noticed
//     (they are passed on);
//   - a shed: ErrQueueFull, ErrMaxWait, ErrDropped or ErrDeadline (see the
//     queue discipline in Gate), each of which matches ErrShed;
//   - ErrClosed if the gate is closed, or is closed while Acquire waits.
//
// It is a run-time error to call Acquire on a nil *Gate, with a nil ctx or
// with c outside [0, Classes()); the panic's message begins "overload: ".
func (g *Gate) Acquire(ctx context.Context, c int, n int64) (token.Token, error) {
	if g == nil {
		panic(nilGate("Acquire"))
	}
	if ctx == nil {
		panic("overload: Acquire called with a nil Context")
	}
	if uint(c) >= uint(g.lay.k) {
		panic(badClass{"Acquire", c, g.lay.k})
	}
	// The fast path, written out here and in TryAcquire: the compiler
	// inlines fits but not a loop around it, and a call would cost an
	// uncontended acquire a tenth more. Is the class's way open (W4), and
	// is there room? A CAS that loses a race retries while that holds.
	if uint64(n-1) < uint64(g.max) && ctx.Err() == nil {
		cc := &g.classes[c&(MaxClasses-1)]
		units := word(n) * cc.unit
		for old := g.load(); old&cc.block == 0 && g.fits(old, cc, n); old = g.load() {
			hook.At(hook.BeforeCAS)
			if g.cas(old, old+units) {
				return g.tokenFor(c, n), nil
			}
		}
	}
	return g.acquireSlow(ctx, c, n)
}

// TryAcquire takes n permits of class c without waiting and reports whether
// it did. It fails, changing nothing, where Acquire would have to wait
// (including behind a waiter it must not overtake) or would fail, and never
// takes the lock. TryAcquire(c, 0) succeeds unless the gate is closed.
//
// It is a run-time error to call TryAcquire on a nil *Gate or with c
// outside [0, Classes()); the panic's message begins "overload: ".
func (g *Gate) TryAcquire(c int, n int64) (token.Token, bool) {
	if g == nil {
		panic(nilGate("TryAcquire"))
	}
	if uint(c) >= uint(g.lay.k) {
		panic(badClass{"TryAcquire", c, g.lay.k})
	}
	if uint64(n-1) < uint64(g.max) {
		cc := &g.classes[c&(MaxClasses-1)]
		units := word(n) * cc.unit
		for old := g.load(); old&cc.block == 0 && g.fits(old, cc, n); old = g.load() {
			hook.At(hook.BeforeCAS)
			if g.cas(old, old+units) {
				return g.tokenFor(c, n), true
			}
		}
	}
	if n != 0 || g.load()&blockBit(c) != 0 && g.isClosed() {
		return token.Token{}, false
	}
	return token.Empty(), true
}

// fits reports whether the word old has room for n permits of class cc:
// the total stays within the limit and the class within its ceiling. With
// the class's block bit clear (W4) it is the fast path's whole test
// (layout.admit, written for the fast paths, which test the bit
// themselves). Only a class with a MaxShare below 1 has a ceiling below the
// limit, so only its arrivals pay for the multiplication that computes it.
// It requires 0 < n ≤ max, so that no count overflows.
func (g *Gate) fits(old word, cc *classConfig, n int64) bool {
	limit := g.lay.limit(old)
	return g.lay.held(old)+n <= limit && (!cc.ceiled || g.lay.field(old, cc.shift)+n <= cc.ceilingAt(limit))
}

// isClosed reports whether the gate is closed. Only the slow paths call it.
func (g *Gate) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// acquireSlow is the rest of Acquire: the checks of the request, then,
// under the lock, the arrival's turn in the service order, the queue
// discipline's refusals, and the wait.
func (g *Gate) acquireSlow(ctx context.Context, c int, n int64) (token.Token, error) {
	if err := g.checkRequest(c, n); err != nil {
		return token.Token{}, err
	}
	if err := ctx.Err(); err != nil {
		return token.Token{}, err
	}
	if n == 0 {
		if g.isClosed() {
			return token.Token{}, ErrClosed
		}
		return token.Empty(), nil
	}
	w := &waiter{class: c, n: n, ready: make(chan struct{}, 1)}
	if err := g.arrive(ctx, w); err != nil {
		return token.Token{}, err
	}
	return g.wait(ctx, w)
}

// checkRequest returns the error for a request of n permits of class c
// that no limit could ever admit.
func (g *Gate) checkRequest(c int, n int64) error {
	if n < 0 || n > g.lay.maxPermits() {
		return fmt.Errorf("%w: overload: requested %d, outside [0, %d]", ErrInvalidPermits, n, g.lay.maxPermits())
	}
	if ceiling := g.classes[c].ceilingAt(g.max); n > ceiling {
		return fmt.Errorf("%w: overload: requested %d of class %q, whose ceiling at the maximum limit %d is %d",
			ErrExceedsMax, n, g.classes[c].name, g.max, ceiling)
	}
	return nil
}

// arrive puts w in its class's queue and lets the dispatch serve it at once
// if the service order allows, as if it had queued and been served by the
// next release; so an arrival under the lock follows exactly the order the
// queue does. Otherwise it applies the queue discipline and leaves w queued
// to wait, or takes it out again and returns the refusal.
func (g *Gate) arrive(ctx context.Context, w *waiter) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	now := g.now()
	if g.queued == 0 && g.perPermit != 0 && now-g.lastGrant >= EstimateMemory {
		g.perPermit = 0 // forgotten: see deadline awareness in Gate
	}
	w.arrival = now
	g.queues[w.class].push(w)
	g.queued++
	g.dispatchLocked(now)
	if w.status == granted {
		return nil // served at once; the wait will find the signal
	}
	if w.status == refused {
		<-w.ready    // the refusal's own signal
		return w.why // shed at once: its class is below one in the overload mode
	}
	why, evicted := g.refusalLocked(ctx, w)
	if why != nil {
		g.refuseLocked(w, why)
		<-w.ready // the refusal's own signal
	}
	if why != nil || evicted {
		g.dispatchLocked(now) // a place left the queue
	}
	if why != nil {
		return why
	}
	w.parked = true
	return nil
}

// refusalLocked returns the queue discipline's refusal of w, which must
// wait, or nil. A full queue first pushes out a waiter of a lower class,
// and says so. It requires that mu is held.
func (g *Gate) refusalLocked(ctx context.Context, w *waiter) (why error, evicted bool) {
	if g.maxQueue > 0 && g.queued > g.maxQueue {
		// Is there a lower class to make room in? Its waiter that would
		// be served last goes.
		for c := g.lay.k - 1; c > w.class; c-- {
			if q := &g.queues[c]; q.len > 0 {
				g.refuseLocked(q.last(), ErrQueueFull)
				evicted = true
				break
			}
		}
		if !evicted {
			return ErrQueueFull, false
		}
	}
	if g.perPermit == 0 {
		return nil, evicted // no grant from the queue yet: nothing to expect
	}
	expected := time.Duration(g.aheadLocked(w)+w.n) * g.perPermit
	if d, ok := ctx.Deadline(); ok && time.Until(d) < expected {
		return ErrDeadline, evicted
	}
	if g.maxWait > 0 && g.maxWait < expected {
		return ErrMaxWait, evicted
	}
	return nil, evicted
}

// aheadLocked returns the permits asked for by the waiters served before w
// in the priority order: every waiter of a higher class, and of its own
// class those before it (all of them in arrival order, none in the
// overload mode, which serves w first). It requires that mu is held.
func (g *Gate) aheadLocked(w *waiter) int64 {
	var ahead int64
	for c := range w.class {
		ahead += g.queues[c].permits
	}
	if q := &g.queues[w.class]; !q.lifo {
		ahead += q.permits - w.n
	}
	return ahead
}

// wait parks until w's wait is decided, its context is done or its maximum
// wait has passed.
func (g *Gate) wait(ctx context.Context, w *waiter) (token.Token, error) {
	var expired <-chan time.Time
	if g.maxWait > 0 {
		t := time.NewTimer(g.maxWait - (g.now() - w.arrival))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-w.ready:
		// A done ctx wins over a grant that came after it: when both are
		// ready, select picks either, so look again.
		if w.status == granted && ctx.Err() != nil {
			g.returnGranted(w)
			return token.Token{}, ctx.Err()
		}
	case <-ctx.Done():
		return g.withdraw(w, ctx.Err())
	case <-expired:
		return g.withdraw(w, ErrMaxWait)
	}
	if w.status == granted {
		return g.tokenFor(w.class, w.n), nil
	}
	return token.Token{}, w.why
}

// withdraw ends a wait that its context or its maximum wait ended: a waiter
// still queued leaves the queue (and the dispatch serves whoever its place
// held back) and gets why; one granted meanwhile keeps its permits if the
// maximum wait ended it, and passes them on if its context did; one refused
// meanwhile gets its refusal.
func (g *Gate) withdraw(w *waiter, why error) (token.Token, error) {
	g.mu.Lock()
	switch w.status {
	case waiting:
		if r, ok := reasonOf(why); ok {
			g.queues[w.class].shed[r]++
		}
		g.removeLocked(w)
		w.status, w.why = refused, why
		g.dispatchLocked(g.now())
		g.mu.Unlock()
		return token.Token{}, why
	case granted:
		g.mu.Unlock()
		if why == ErrMaxWait {
			return g.tokenFor(w.class, w.n), nil
		}
		g.returnGranted(w)
		return token.Token{}, why
	}
	g.mu.Unlock()
	return token.Token{}, w.why
}

// returnGranted passes on the permits granted to a waiter that returns
// without them.
func (g *Gate) returnGranted(w *waiter) { g.release(w.class, w.n) }

// tokenFor returns a token for n permits of class c held from g.
func (g *Gate) tokenFor(c int, n int64) token.Token {
	return token.New((*owner)(g), n, uint32(c))
}
