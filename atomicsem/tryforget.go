package atomicsem

import (
	"github.com/atomicsem/atomicsem/internal/hook"
	"github.com/atomicsem/atomicsem/internal/state"
)

// TryForget takes n available permits out of circulation at once and
// reports whether it did: the available count and the limit both fall by
// n, as TryAcquire(n) followed by Forget on its token would leave them, but
// in one compare-and-swap and without a token. It returns the limit as it
// left it (as it found it, on failure), so that a caller that adds permits
// up to the maximum, as credit accrues, can see the room left without the
// queue lock: TryForget(0) takes nothing and only reads the limit.
//
// TryForget follows TryAcquire's rules: it fails, changing nothing, for
// n < 0 or n > MaxPermits, after Close, when fewer than n permits are
// available, and when it would take permits ahead of a parked waiter that
// the current limit admits (in FIFO mode always, in barging mode while the
// semaphore hands off). Lowering the limit can change which parked waiters
// the limit admits, so while any waiter is parked the change is made under
// the queue lock, as Forget's is.
//
// Memory ordering: a TryForget that succeeds, like TryAcquire, is ordered
// after the release or limit change that made its permits available.
func (s *Semaphore) TryForget(n int64) (limit int64, ok bool) {
	if s == nil {
		panic(nilSemaphore("TryForget"))
	}
	if 0 < n && n <= MaxPermits {
		w, ok := s.forgetFast(n)
		if ok {
			return w.Limit(), true
		}
		if w < state.BlockLimitMove && s.cache == nil {
			return w.Limit(), false // too few permits, and no queue to serve
		}
	}
	return s.tryForgetSlow(n)
}

// forgetFast is TryForget's fast path: one CAS while nobody is queued and
// n permits are free; it returns the word it installed, or the word that
// refused it. It requires
// 0 < n ≤ MaxPermits. (n available means n ≤ limit, as LessLimit needs.)
func (s *Semaphore) forgetFast(n int64) (state.Word, bool) {
	for {
		old := s.load()
		if old >= state.BlockLimitMove || old.Available() < n {
			return old, false
		}
		hook.At(hook.BeforeCAS)
		if lowered := old.LessLimit(n); s.cas(old, lowered) {
			return lowered, true
		}
	}
}

// tryForgetSlow is TryForget for a request of nothing or out of range, or
// one the fast path refused on a closed semaphore or with waiters queued,
// whose queue state the limit decides: changeLimit then makes the change
// under the queue lock.
func (s *Semaphore) tryForgetSlow(n int64) (limit int64, ok bool) {
	s.made()
	if n < 0 || n > MaxPermits {
		return s.load().Limit(), false
	}
	if n == 0 {
		w := s.load()
		return w.Limit(), !w.Closed()
	}
	change := forgetAvailableFIFO
	if s.barging() {
		change = forgetAvailableBarging
	}
	if s.cache != nil {
		// The permits may be cached: return them to the word first.
		s.mu.Lock()
		s.drainLocked()
		_, ok := s.serveLocked(change, n)
		s.mu.Unlock()
		if !ok {
			return s.load().Limit(), false
		}
		return s.load().Limit(), true
	}
	if _, ok := s.changeLimit(change, n); !ok {
		return s.load().Limit(), false
	}
	// The limit the change left is not returned by changeLimit; one more
	// load reads it, or a later one, which a caller watching the room
	// must allow for in any case.
	return s.load().Limit(), true
}

// forgetAvailableFIFO and forgetAvailableBarging are TryForget's transition
// in each mode, in the signature of the limit moves that changeLimit and
// serveLocked apply. Under the queue lock, eligible (FIFO) and starving
// (barging) say exactly whether a waiter is queued that TryForget must not
// overtake, so the fast path's block words are the whole fairness test.
func forgetAvailableFIFO(w state.Word, n, _ int64) (state.Word, bool) {
	return w.ForgetAvailable(n, state.BlockFIFO)
}

func forgetAvailableBarging(w state.Word, n, _ int64) (state.Word, bool) {
	return w.ForgetAvailable(n, state.BlockBarging)
}
