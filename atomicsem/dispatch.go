package atomicsem

import (
	"time"

	"github.com/atomicsem/atomicsem/internal/hook"
	"github.com/atomicsem/atomicsem/internal/state"
)

// Serving the queue.
//
// Whenever permits come back or the limit rises while waiters are parked,
// the queue is served under mu: dispatchLocked walks it from the front and
// decides, from one load of the word, which waiters leave it; then one
// compare-and-swap installs the outcome (permits granted, flags) and only
// after it succeeds are the waiters woken. A failed CAS means the word moved
// under the walk, and the walk is decided again from a fresh load. So a
// dispatch changes the word once however many waiters it serves, and a
// release in FIFO mode returns its permits and hands them on in that same
// change (returnToQueue).
//
// The walk: a waiter that asks for more than the limit is passed over (no
// release can serve it, so it must not hold back others, and it keeps its
// place); the first other waiter that does not fit stops the walk, which is
// what keeps large requests from starving. In FIFO mode, and in barging mode
// while starving, each waiter that fits is granted its permits directly.
// Otherwise (barging) it is woken to compete for them, and the walk wakes
// only as many as the free permits could serve.
//
// Barging mode turns to hand-off (sets the starving flag) when the waiter
// that stops the walk has waited longer than the starvation bound, and back
// to barging when a waiter it grants had waited less than that: the ones
// that waited too long are then served.

// dispatchPlan is what one walk of the queue decided.
type dispatchPlan struct {
	served  int64 // waiters that leave the queue, granted or woken
	granted int64 // permits handed to them outright (hand-off)
	fresh   bool  // a granted waiter had waited less than the starvation bound
	starved bool  // the waiter that stopped the walk waited past the bound
}

// dispatch is outlined so that its callers' fast paths stay small.
func (s *Semaphore) dispatch() {
	hook.At(hook.BeforeDispatch)
	s.mu.Lock()
	s.dispatchLocked()
	s.mu.Unlock()
}

// returnToQueue gives n permits returned by a token straight to the front
// waiters: the permits come back and are granted in the same CAS, so a
// hand-off costs one change of the word instead of two.
func (s *Semaphore) returnToQueue(n int64) {
	hook.At(hook.BeforeDispatch)
	s.mu.Lock()
	s.serveLocked(n)
	s.mu.Unlock()
}

// dispatchLocked serves the queue with the permits available now. It
// requires that s.mu is held.
func (s *Semaphore) dispatchLocked() { s.serveLocked(0) }

// serveLocked returns n permits (none if n is 0) and serves the queue with
// what is then available, in one CAS. It requires that s.mu is held.
func (s *Semaphore) serveLocked(n int64) {
	for {
		old := s.load()
		base, ok := old.Release(n)
		if !ok {
			panic("atomicsem: internal error: returned permits exceed those held")
		}
		plan := s.walkLocked(base, false)
		new := s.settle(base, plan)
		if n == 0 && plan.served == 0 && new == old {
			return // nothing to do
		}
		// Even when new == old (a hand-off of exactly what came back),
		// the CAS is what confirms that the walk saw the current word.
		hook.At(hook.BeforeCAS)
		if !s.cas(old, new) {
			continue // the word moved: decide again
		}
		// Stats must not count a waiter that may already have returned.
		s.queued.Sub(plan.served)
		s.walkLocked(base, true)
		return
	}
}

// walkLocked walks the queue as base allows and returns what it decided.
// With wake set it also carries the decision out: takes the served waiters
// off the queue and wakes them, which must wait until the word says so.
// Given the same base and queue, both walks decide the same. It requires
// that s.mu is held.
func (s *Semaphore) walkLocked(base state.Word, wake bool) (plan dispatchPlan) {
	if base.Closed() {
		return plan // Close has failed everyone queued
	}
	if s.wants.smallest(&s.queue) > base.Total() {
		return plan // every waiter asks for more than the limit
	}
	handOff := !s.barging || base.Starving()
	free := base.Count()
	for w := s.queue.head; w != nil; {
		next := w.next
		switch {
		case w.n > base.Total():
			w = next // no release can serve w; it keeps its place
			continue
		case free < w.n:
			plan.starved = !wake && s.waitedTooLong(w)
			return plan
		}
		free -= w.n
		plan.served++
		if handOff {
			plan.granted += w.n
			plan.fresh = plan.fresh || (!wake && s.barging && !s.waitedTooLong(w))
		}
		if wake {
			s.queue.remove(w)
			s.wants.removed(w.n)
			w.status = woken
			if handOff {
				w.status = granted
			}
			w.ready.Set() // from here on w may be reused by another Acquire
		}
		w = next
	}
	return plan
}

// settle returns base with the plan's permits granted and its flags
// rebuilt. It requires that s.mu is held.
func (s *Semaphore) settle(base state.Word, plan dispatchPlan) state.Word {
	new := base.WithCount(base.Count() - plan.granted)
	if plan.served == s.queued.Load() {
		// The queue empties, and with it any reason to hand off.
		return new.WithFlag(state.WaitersBit, false).WithFlag(state.StarvingBit, false)
	}
	starving := (base.Starving() && !plan.fresh) || plan.starved
	return new.WithFlag(state.StarvingBit, starving)
}

// waitedTooLong reports whether w, in barging mode, has waited past the
// starvation bound. It is always false in FIFO mode, which never sets the
// starving flag.
func (s *Semaphore) waitedTooLong(w *waiter) bool {
	return s.barging && time.Since(w.since) >= s.starvationBound
}

// markStarvingLocked sets the starving flag if w, a waiter at the front in
// barging mode, has waited longer than the starvation bound. From then on
// arrivals queue and releases hand permits to the front waiters, until a
// dispatch grants a waiter that waited less than the bound. It requires that
// s.mu is held.
func (s *Semaphore) markStarvingLocked(w *waiter) {
	if !s.waitedTooLong(w) {
		return
	}
	for {
		old := s.load()
		if old.Starving() || !old.Waiters() {
			return
		}
		hook.At(hook.BeforeCAS)
		if s.cas(old, old|state.StarvingBit) {
			return
		}
	}
}
