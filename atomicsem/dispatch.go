package atomicsem

import (
	"github.com/atomicsem/atomicsem/internal/hook"
	"github.com/atomicsem/atomicsem/internal/state"
)

// Serving the queue.
//
// Whenever permits come back while a waiter that fits under the limit is
// parked (the eligible flag), or the limit moves while any waiter is parked
// (the queued flag), the queue is served under mu: serveLocked applies the
// change to a freshly loaded word, walks the queue from the front and
// decides, from that one word, which waiters leave it; then one
// compare-and-swap installs the outcome (the change, the permits granted,
// the queue flags) and only after it succeeds are the waiters woken. A
// failed CAS means the word moved under the walk, and everything is decided
// again from a fresh load. So a dispatch changes the word once however many
// waiters it serves, and a release in FIFO mode that finds eligible set
// returns its permits and hands them on in that same change.
//
// The walk: a waiter that asks for more than the limit is passed over (no
// release can serve it, so it must not hold back others, and it keeps its
// place); the first other waiter that does not fit stops the walk, which is
// what keeps large requests from starving. In FIFO mode, and in barging mode
// while starving, each waiter that fits is granted its permits directly.
// Otherwise (barging) it is woken to compete for them, and the walk wakes
// only as many as the free permits could serve. The walk also recomputes
// the eligible flag: a waiter is left that fits under the limit exactly
// when the walk stopped at one.
//
// Barging mode turns to hand-off (sets the starving flag) when the waiter
// that stops the walk has waited longer than the starvation bound, and back
// to barging when a waiter it grants had waited less than that: the ones
// that waited too long are then served.

// dispatchPlan is what one walk of the queue decided.
type dispatchPlan struct {
	served  int64 // waiters that leave the queue, granted or woken
	granted int64 // permits handed to them outright (hand-off)
	stopped bool  // the walk stopped at a waiter that fits under the limit
	fresh   bool  // a granted waiter had waited less than the starvation bound
	starved bool  // the waiter that stopped the walk waited past the bound
}

// serve takes mu and calls serveLocked. It also puts rec, the record of a
// granted waiter whose permits come back, on the free list; rec may be nil.
func (s *Semaphore) serve(change transition, arg int64, rec *waiter) bool {
	hook.At(hook.BeforeDispatch)
	s.mu.Lock()
	if rec != nil {
		s.free.putLocked(rec)
	}
	ok := s.serveLocked(change, arg)
	s.mu.Unlock()
	return ok
}

// dispatchLocked serves the queue with the permits available now. It
// requires that s.mu is held.
func (s *Semaphore) dispatchLocked() { s.serveLocked(state.Word.Release, 0) }

// serveLocked applies change(word, arg) and serves the queue with the
// permits and the limit that result, in one CAS; change is a release of the
// permits a token returns (Release with 0 for none), or a move of the
// limit. It reports whether change accepted the word. It requires that
// s.mu is held.
func (s *Semaphore) serveLocked(change transition, arg int64) bool {
	for {
		old := s.load()
		base, ok := change(old, arg)
		if !ok {
			return false
		}
		plan := s.walkLocked(base, false)
		new := s.settle(base, plan)
		if plan.served == 0 && new == old {
			return true // nothing to do
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
		return true
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
	handOff := !s.barging() || base.Starving()
	free := base.Count()
	for w := s.queue.head; w != nil; {
		next, want := w.next, w.want()
		switch {
		case want > base.Total():
			w = next // no release can serve w; it keeps its place
			continue
		case free < want:
			plan.stopped = true
			plan.starved = !wake && s.waitedTooLong(w)
			return plan
		}
		free -= want
		plan.served++
		if handOff {
			plan.granted += want
			plan.fresh = plan.fresh || (!wake && s.barging() && !s.waitedTooLong(w))
		}
		if wake {
			s.queue.remove(w)
			s.wants.removed(want)
			w.status = woken
			if handOff {
				w.status = granted
			}
			w.ready.Set() // from here on w belongs to its Acquire again
		}
		w = next
	}
	return plan
}

// settle returns base with the plan's permits granted and its flags
// rebuilt. It requires that s.mu is held.
func (s *Semaphore) settle(base state.Word, plan dispatchPlan) state.Word {
	new := base.WithHeld(base.Held() + plan.granted)
	queued := plan.served < s.queued.Load()
	starving := (base.Starving() && !plan.fresh) || plan.starved
	return new.WithQueue(queued, plan.stopped, starving)
}

// waitedTooLong reports whether w, in barging mode, has waited past the
// starvation bound. It is always false in FIFO mode, which never sets the
// starving flag.
func (s *Semaphore) waitedTooLong(w *waiter) bool {
	return s.barging() && w.waitedFor() >= s.starvationBound
}

// markStarvingLocked sets the starving flag if w, a woken waiter requeued in
// barging mode, has waited longer than the starvation bound (any waiter
// ahead of it arrived earlier and has waited longer still). From then on
// arrivals queue and releases hand permits to the front waiters, until a
// dispatch grants a waiter that waited less than the bound. It requires that
// s.mu is held.
func (s *Semaphore) markStarvingLocked(w *waiter) {
	if !s.waitedTooLong(w) {
		return
	}
	for {
		old := s.load()
		if old.Starving() || !old.Eligible() {
			return
		}
		hook.At(hook.BeforeCAS)
		if s.cas(old, old|state.StarvingBit) {
			return
		}
	}
}
