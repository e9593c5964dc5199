package atomicsem

import (
	"github.com/atomicsem/atomicsem/internal/hook"
	"github.com/atomicsem/atomicsem/internal/state"
)

// Serving the queue.
//
// Whenever permits come back while a waiter that fits under the limit is
// parked (the word shows eligible), or the limit moves while any waiter is
// parked (queued), the queue is served under mu: serveLocked applies the
// change to a freshly loaded word, walks the queue from the front and
// decides, from that one word, which waiters leave it; then one
// compare-and-swap installs the outcome (the change, the permits granted,
// the queue state, the idle flag) and only after it succeeds are the
// waiters woken. A failed CAS means the word moved under the walk, and
// everything is decided again from a fresh load. So a dispatch changes the
// word once however many waiters it serves, and a release in FIFO mode that
// finds the queue eligible returns its permits and hands them on in that
// same change. When that hand-off leaves the word exactly as it was (the
// usual case under contention: one permit back, one waiter granted it),
// nothing is written: in FIFO mode an eligible word keeps every other
// writer off it (invariant I8), so there is nothing for a CAS to confirm.
// The commonest such hand-off, one that leaves nothing free and a waiter
// that fits still queued, is recognised by handOff from the word and the
// first two waiters without walking the queue at all.
//
// The walk: a waiter that asks for more than the limit is passed over (no
// release can serve it, so it must not hold back others, and it keeps its
// place); the first other waiter that does not fit stops the walk, which is
// what keeps large requests from starving. In FIFO mode, and in barging mode
// while starving, each waiter that fits is granted its permits directly.
// Otherwise (barging) it is woken to compete for them, and the walk wakes
// only as many as the free permits could serve. The walk also recomputes
// the queue state: a waiter is left that fits under the limit exactly when
// the walk stopped at one.
//
// Barging mode wakes one round of waiters at a time, as sync.Mutex does
// with its woken flag. While a woken waiter is on its way (queue.woken is
// above zero) the walk wakes nobody more and the word shows queued rather
// than eligible, so that releases return their permits with one CAS and
// leave the lock alone. The waiter on its way takes any permits it finds
// free; when it settles (takes them, queues again, withdraws or fails) it
// serves the queue once more, which wakes the next round if permits are
// free or makes the word eligible again, so that the next release wakes
// one. Without the rule every release that met the eligible word took the
// lock and woke another waiter, whichever were already on their way; with
// arrivals on many cores taking the permits first, those waiters mostly
// lost and parked again, and the lock and the wake-ups cost more per
// permit than FIFO hand-off does.
//
// A barging release that finds the word eligible (waiters that fit, none on
// its way) returns its permits by CAS and then, under mu, wakes as many
// front waiters as the permits free at its return could serve, even if an
// arrival has taken them since (see wakeForLocked): a wake decided on what
// is free when the lock is finally taken would, with arrivals quicker than
// the lock, wake nobody, leave the word eligible and send every release to
// the lock again.
//
// Barging mode turns to hand-off (starving) when the waiter that stops the
// walk has waited longer than the starvation bound, and back to barging
// when a waiter it grants had waited less than that: the ones that waited
// too long are then served.
//
// A change that leaves no permit held while WaitIdle waits (the word's idle
// flag) clears the flag in the same CAS and wakes the idle waiters after
// it.

// dispatchPlan is what one walk of the queue decided.
type dispatchPlan struct {
	served  int64 // waiters that leave the queue, granted or woken
	granted int64 // permits handed to them outright (hand-off)
	woken   int64 // waiters woken to compete for permits (barging)
	stopped bool  // the walk stopped at a waiter that fits under the limit
	fresh   bool  // a granted waiter had waited less than the starvation bound
	starved bool  // the waiter that stopped the walk waited past the bound
	idle    bool  // no permit is left held, and WaitIdle callers wait
}

// serve takes mu and calls serveLocked: a move of the limit while waiters
// are queued, or one that ends a WaitIdle.
func (s *Semaphore) serve(change transition, arg int64) (raised int64, ok bool) {
	hook.At(hook.BeforeDispatch)
	s.mu.Lock()
	raised, ok = s.serveLocked(change, arg)
	s.mu.Unlock()
	return raised, ok
}

// serveLocked applies change(word, arg, max), a move of the limit, and
// serves the queue with the permits and the limit that result, in one
// change of the word. It reports whether change accepted the word, and how
// far it raised the limit. It requires that s.mu is held.
func (s *Semaphore) serveLocked(change transition, arg int64) (raised int64, ok bool) {
	for {
		old := s.load()
		base, ok := change(old, arg, s.max)
		if !ok {
			return 0, false
		}
		if s.commitLocked(old, base, 0) {
			return base.Limit() - old.Limit(), true
		}
	}
}

// releaseLocked is serveLocked for the return of n held permits (0 for
// none), and reports whether n were held. It calls state.Word.Release
// directly rather than through a transition, so that the compiler inlines
// it. It requires that s.mu is held.
func (s *Semaphore) releaseLocked(n int64) bool {
	for {
		old := s.load()
		base, ok := old.Release(n)
		if !ok {
			return false
		}
		if s.commitLocked(old, base, 0) {
			return true
		}
	}
}

// wakeForLocked is the dispatch of a barging release that found the word
// eligible and has returned its permits by CAS, leaving freed permits free:
// it wakes as many front waiters as freed permits could serve, or as are
// free now if that is more. It requires that s.mu is held.
func (s *Semaphore) wakeForLocked(freed int64) {
	for {
		old := s.load()
		if s.commitLocked(old, old, freed) {
			return
		}
	}
}

// commitLocked serves the queue as base allows, base being old, a word
// loaded under mu, with an operation's change applied, and a barging wake
// counting at least freed permits free (0 for none: see wakeForLocked);
// then it installs the outcome in place of old and wakes the waiters
// served. It reports false, having changed nothing, if the word moved since
// old was loaded. It requires that s.mu is held.
func (s *Semaphore) commitLocked(old, base state.Word, freed int64) bool {
	var plan dispatchPlan
	s.walkLocked(base, freed, false, &plan)
	next := s.wordForLocked(base, &plan)
	if plan.served == 0 && next == old {
		return true // nothing to do
	}
	// A hand-off of exactly what came back leaves the word as it was.
	// The CAS would then only confirm that the walk saw the current word,
	// which the word itself already guarantees while it shuts out every
	// writer but the lock's holder (I8); otherwise the CAS is what
	// confirms it.
	hook.At(hook.BeforeCAS)
	if (next != old || !s.onlyLockWritesLocked(old)) && !s.cas(old, next) {
		return false // the word moved: decide again
	}
	s.queue.len -= plan.served
	s.walkLocked(base, freed, true, &plan)
	if plan.idle {
		s.wakeIdleLocked()
	}
	return true
}

// onlyLockWritesLocked reports whether old, the current word as loaded
// under mu, stops every lock-free writer (invariant I8): in FIFO mode an
// eligible word does, since it stops the fast path's acquires and sends
// releases to the queue, and limit changes come to the lock while anyone
// is queued at all. So while mu is held and the word shows it, the word
// cannot change. In barging mode arrivals take permits lock-free beside
// eligible waiters, so it is always false there. It requires that s.mu is
// held.
func (s *Semaphore) onlyLockWritesLocked(old state.Word) bool {
	return !s.barging() && old.Eligible()
}

// walkLocked walks the queue as base allows, a barging wake counting at
// least freed permits free, and writes what it decided to plan, which it
// expects zeroed. With wake set it also carries the decision out: takes the
// served waiters off the queue and wakes them, which must wait until the
// word says so. Given the same base, freed and queue, both walks decide the
// same. The plan is passed by pointer so that the walk fills the caller's
// plan in place rather than copying one back. It requires that s.mu is
// held.
func (s *Semaphore) walkLocked(base state.Word, freed int64, wake bool, plan *dispatchPlan) {
	if base.Closed() {
		return // Close has failed everyone queued
	}
	if s.queue.wants.smallest(&s.queue) > base.Limit() {
		return // every waiter asks for more than the limit
	}
	handOff := !s.barging() || base.Starving()
	if !handOff && s.queue.woken > 0 {
		// A waiter that fits is queued, and a woken one is on its way:
		// it serves the queue when it settles.
		plan.stopped = true
		return
	}
	free := base.Available()
	if !handOff {
		free = max(free, freed)
	}
	for w := s.queue.head; w != nil; {
		next, want := w.next, w.want()
		switch {
		case want > base.Limit():
			w = next // no release can serve w; it keeps its place
			continue
		case free < want:
			plan.stopped = true
			plan.starved = !wake && s.waitedTooLong(w)
			return
		}
		free -= want
		plan.served++
		if handOff {
			plan.granted += want
			plan.fresh = plan.fresh || (!wake && s.barging() && !s.waitedTooLong(w))
		} else {
			plan.woken++
		}
		if wake {
			s.queue.remove(w)
			s.queue.wants.removed(want)
			if handOff {
				w.setStatusLocked(granted)
			} else {
				w.setStatusLocked(woken)
				s.queue.woken++
			}
			w.ready.Set() // from here on w belongs to its Acquire again
		}
		w = next
	}
}

// wordForLocked returns base with the plan's permits granted, its queue state
// rebuilt and, if that leaves no permit held, the idle flag cleared (which
// it records in the plan). It requires that s.mu is held, and that the
// plan's waiters are not yet woken.
func (s *Semaphore) wordForLocked(base state.Word, plan *dispatchPlan) state.Word {
	w := base.WithHeld(base.Held() + plan.granted)
	queued := plan.served < s.queue.len
	starving := (base.Starving() && !plan.fresh) || plan.starved
	// In barging mode the word shows eligible only while no woken waiter
	// is on its way (starving implies eligible, and hand-off wakes nobody).
	eligible := plan.stopped && (starving || s.queue.woken+plan.woken == 0)
	w = w.WithQueue(state.QueueOf(queued, eligible, starving))
	if w.Idle() && w.Held() == 0 {
		w = w.WithIdle(false)
		plan.idle = true
	}
	return w
}

// waitedTooLong reports whether w, in barging mode, has waited past the
// starvation bound. It is always false in FIFO mode, which never turns to
// starving.
func (s *Semaphore) waitedTooLong(w *waiter) bool {
	return s.barging() && w.waitedFor() >= s.starvationBound
}

// fitsLocked reports whether a queued waiter fits under old's limit. It
// requires that s.mu is held.
func (s *Semaphore) fitsLocked(old state.Word) bool {
	return s.queue.wants.smallest(&s.queue) <= old.Limit()
}

// wakeOnItsWayLocked reports whether, in barging mode, a woken waiter is on
// its way, so that the word must not show eligible unless starving. It
// requires that s.mu is held.
func (s *Semaphore) wakeOnItsWayLocked() bool { return s.queue.woken > 0 }

// markStarvingLocked turns the queue to starving if w, a woken waiter
// requeued in barging mode, has waited longer than the starvation bound
// (any waiter ahead of it arrived earlier and has waited longer still).
// From then on arrivals queue and releases hand permits to the front
// waiters, until a dispatch grants a waiter that waited less than the
// bound. It requires that s.mu is held.
func (s *Semaphore) markStarvingLocked(w *waiter) {
	if !s.waitedTooLong(w) {
		return
	}
	for {
		old := s.load()
		if old.Starving() || !s.fitsLocked(old) {
			return
		}
		hook.At(hook.BeforeCAS)
		if s.cas(old, old.WithQueue(state.Starving)) {
			return
		}
	}
}
