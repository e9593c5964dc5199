package atomicsem

import (
	"github.com/atomicsem/atomicsem/internal/hook"
	"github.com/atomicsem/atomicsem/internal/state"
	"github.com/atomicsem/atomicsem/token"
)

// Returning permits.
//
// A token's Release calls its owner, which is the semaphore for a token
// taken without parking (owner) and the waiter record for one granted to a
// parked Acquire (grantedOwner). Either way the permits go back through
// releaseFast, one CAS while no queued waiter fits under the limit, or
// releaseSlow, which serves the queue with them: in FIFO mode handOff
// grants them to the front waiters under mu, in barging mode they are
// returned first and the front waiters woken to compete for them (unless
// a woken waiter is already on its way, when the word does not show
// eligible and releaseFast returns them alone).

func (s *Semaphore) tokenFor(n int64) token.Token { return token.New((*owner)(s), n, 0) }

// owner is the semaphore as its tokens see it. The type is unexported, so no
// caller can build a token that returns permits to a semaphore.
type owner Semaphore

// ReturnPermits implements token.Owner.
func (o *owner) ReturnPermits(n int64, _ uint32) {
	s := (*Semaphore)(o)
	if !s.releaseFast(n) {
		s.releaseSlow(n, nil)
	}
}

// ForgetPermits implements token.Owner.
func (o *owner) ForgetPermits(n int64, _ uint32) { (*Semaphore)(o).forgetPermits(n) }

// SplitPermits implements token.Owner: both parts return to the semaphore.
func (o *owner) SplitPermits(_, _ int64, tag uint32) (token.Owner, uint32) { return o, tag }

// grantedOwner is the owner of a token that a parked Acquire was granted by
// hand-off: the waiter record it parked with. The record goes back to its
// semaphore's free list with the permits, under the queue lock that a
// release with waiters to serve takes anyway, so on the contended path the
// free list costs no atomic operation of its own. The record is off the
// queue and its event clear. The token's tag is the record's generation
// when it was granted (see claim).
type grantedOwner waiter

// ReturnPermits implements token.Owner.
func (g *grantedOwner) ReturnPermits(n int64, tag uint32) {
	w := (*waiter)(g)
	w.claim(tag)
	if w.sem.releaseFast(n) {
		w.sem.recycle(w)
	} else {
		w.sem.releaseSlow(n, w)
	}
}

// ForgetPermits implements token.Owner.
func (g *grantedOwner) ForgetPermits(n int64, tag uint32) {
	w := (*waiter)(g)
	w.claim(tag)
	w.sem.forgetPermits(n)
	w.sem.recycle(w)
}

// SplitPermits implements token.Owner: the record goes back to the free
// list now, and both parts return their permits to the semaphore.
func (g *grantedOwner) SplitPermits(_, _ int64, tag uint32) (token.Owner, uint32) {
	w := (*waiter)(g)
	w.claim(tag)
	w.sem.recycle(w)
	return (*owner)(w.sem), 0
}

// The panics of a token ended twice that the semaphore catches.
const (
	errReturnExceedsHeld = "atomicsem: returned permits exceed those held (was a token copied, or ended by two goroutines at once?)"
	errForgetExceedsHeld = "atomicsem: forgotten permits exceed those held (was a token copied, or ended by two goroutines at once?)"
	errTokenEndedTwice   = "atomicsem: a token granted to a parked Acquire was ended twice (was it copied, or ended by two goroutines at once?)"
)

// releaseToken and forgetToken are never called. They are here for the
// compiler, which inlines a function from another package only if it can
// read the function's body, and reads bodies from the export data of the
// packages the caller imports. A caller that ends the tokens Acquire
// returns but never names token.Token does not import package token; these
// two make the compiler inline Release and Forget into a function of this
// package, which puts those bodies into atomicsem's export data, so that
// such a caller inlines them too (the inlining test checks it); without
// them its Release is a call. They need not be inlinable themselves, and
// are not: each costs one more than the budget.
//
//lint:ignore U1000 kept for the bodies they bring into the export data
func releaseToken(t *token.Token) { t.Release() }

//lint:ignore U1000 kept for the bodies they bring into the export data
func forgetToken(t *token.Token) { t.Forget() }

// releaseFast is the fast path of a token's Release: it returns n held
// permits in one CAS unless a queued waiter fits under the limit or a
// WaitIdle caller waits, and reports whether it did. It is small enough to
// be inlined into both owners.
func (s *Semaphore) releaseFast(n int64) bool {
	for {
		old := s.load()
		held := old.Held() - n
		if held < 0 || old.ReleaseBlocked() {
			return false // serve the queue, end WaitIdle, or panic, in releaseSlow
		}
		hook.At(hook.BeforeCAS)
		if s.cas(old, old.WithHeld(held)) {
			return true
		}
	}
}

// releaseSlow returns n held permits when releaseFast cannot, and rec, the
// record of the parked Acquire they were granted to, or nil. It panics,
// changing nothing, if n is more than is held: a token's guard rules that
// out unless the token was copied or ended by two goroutines at once.
func (s *Semaphore) releaseSlow(n int64, rec *waiter) {
	if !s.barging() {
		// FIFO: handOff checks n against what is held, under the lock,
		// so the word is not loaded here first.
		s.handOff(n, rec)
		return
	}
	for {
		old := s.load()
		released, ok := old.Release(n)
		if !ok {
			panic(errReturnExceedsHeld)
		}
		if old.Starving() || (released.Held() == 0 && old.Idle()) {
			// Hand-off, or the last permits out while WaitIdle waits:
			// the return is made under the lock.
			s.handOff(n, rec)
			return
		}
		// Barging: return the permits without the lock. If the word
		// showed eligible, no woken waiter is on its way, and this
		// release wakes the front waiters to compete for the permits.
		hook.At(hook.BeforeCAS)
		if s.cas(old, released) {
			if old.Eligible() {
				s.wakeFor(released.Available(), rec)
			} else {
				s.recycle(rec)
			}
			return
		}
	}
}

// wakeFor takes mu and wakes as many front waiters as freed permits, the
// permits a barging release left free, could serve (see wakeForLocked). It
// also puts rec, the record of a granted waiter whose permits came back,
// on the free list; rec may be nil.
func (s *Semaphore) wakeFor(freed int64, rec *waiter) {
	hook.At(hook.BeforeDispatch)
	s.mu.Lock()
	if rec != nil {
		s.free.putLocked(rec)
	}
	s.wakeForLocked(freed)
	s.mu.Unlock()
}

// handOff takes mu, returns n held permits and serves the queue with
// them. It panics, changing nothing, if n is more than is held. It also
// puts rec, the record of a granted waiter whose permits come back, on the
// free list; rec may be nil.
//
// The usual FIFO hand-off under contention, the n permits straight to a
// front waiter that asks for n, is recognised from the word and the first
// two waiters and carried out here, without the dispatch's walks of the
// queue and without a write to the word. The conditions, in FIFO mode:
//   - n are held, so the return is valid;
//   - nothing is free before the return, so after the front waiter takes
//     exactly the n returned (it asks for n) nothing is left for anyone
//     behind it. With nothing free, limit equals held, so n ≤ limit: the
//     front waiter fits under the limit, and by I6 the word shows eligible;
//   - the waiter behind it fits under the limit too, so the queue stays
//     eligible.
//
// Held then goes down by n and up by n, so the word stays as it was (and
// held stays above zero, so no WaitIdle ends), and while it shows eligible
// nobody else may write it (I8): there is nothing to install. The waiter is
// woken after mu is released, so that the goroutine it wakes, which under
// contention will soon want mu for its own release, does not find it held
// and park on it a second time. A waiter cancelled meanwhile waits for that
// wake-up (see withdraw).
func (s *Semaphore) handOff(n int64, rec *waiter) {
	hook.At(hook.BeforeDispatch)
	s.mu.Lock()
	if rec != nil {
		s.free.putLocked(rec)
	}
	old, front := s.load(), s.queue.head
	held, limit := old.Held(), old.Limit()
	if !s.barging() && held >= n && held == limit &&
		front != nil && front.want() == n && front.next != nil && front.next.want() <= limit {
		hook.At(hook.BeforeCAS) // where commitLocked would confirm the word
		s.removeLocked(front)
		front.setStatusLocked(granted)
		s.mu.Unlock()
		hook.At(hook.BeforeWake)
		front.ready.Set() // from here on front belongs to its Acquire again
		return
	}
	ok := s.releaseLocked(n)
	s.mu.Unlock()
	if !ok {
		panic(errReturnExceedsHeld)
	}
}

// forgetPermits retires n held permits. A lower limit can let waiters that
// asked for more than it step aside for the ones behind them: changeLimit
// serves the queue.
func (s *Semaphore) forgetPermits(n int64) {
	if _, ok := s.changeLimit(state.Word.Forget, n); !ok {
		panic(errForgetExceedsHeld)
	}
}
