package atomicsem

import (
	"context"
	"runtime"

	"github.com/atomicsem/atomicsem/internal/hook"
	"github.com/atomicsem/atomicsem/internal/state"
	"github.com/atomicsem/atomicsem/semcontract"
	"github.com/atomicsem/atomicsem/token"
)

// Acquire blocks until n permits are granted, then returns a token holding
// them. Acquiring 0 permits succeeds at once with a token for nothing.
//
// On failure Acquire returns the zero Token and leaves the semaphore as if it
// had not been called:
//   - ErrInvalidPermits if n < 0 or n > MaxPermits;
//   - ErrExceedsMax if n is larger than the semaphore's maximum, since no
//     limit could ever admit it (a request above the current limit but within
//     the maximum waits for the limit to rise);
//   - ctx.Err() if ctx is done before Acquire has the permits: when the call
//     begins, even if permits are free, or while it waits, even if permits
//     were granted to it after ctx was done but before it noticed. Permits
//     granted in such a race are passed on to the next waiters. A token is
//     returned only if ctx was not yet done when Acquire saw it had the
//     permits;
//   - ErrClosed if the semaphore is closed, or is closed while Acquire waits;
//     if ctx is done as well, Acquire may return ctx.Err() instead, and does
//     when ctx was done before the call.
//
// It is a run-time error to call Acquire on a nil *Semaphore or with a nil
// ctx; the panic's message begins "atomicsem: ".
func (s *Semaphore) Acquire(ctx context.Context, n int64) (token.Token, error) {
	if s == nil {
		panic(nilSemaphore("Acquire"))
	}
	if ctx == nil {
		panic(nilContext("Acquire"))
	}
	var w *waiter
	bubbled := false
	if 0 < n && n <= MaxPermits && !isDone(ctx) {
		if c := s.cache; c != nil {
			// The permit cache's fast path, written out here so that a
			// stripe with the permits costs no call (see cache.go).
			home := c.home()
			if st := &c.stripes[home]; st.take(n) || s.acquireCachedSlow(st, n) {
				return s.cachedTokenFor(n, home), nil
			}
		} else if s.acquireFast(n) {
			return s.tokenFor(n), nil
		}
		bubbled = inBubble()
		w = s.queueBehind(n, bubbled)
	}
	if w == nil {
		var err error
		if w, err = s.acquireSlow(ctx, n, bubbled); err != nil {
			return token.Token{}, err
		}
		if w == nil {
			if n == 0 {
				return token.Empty(), nil
			}
			return s.tokenFor(n), nil // taken under the lock
		}
	}
	// Parked. The waiter waits here, not in a function of its own: a
	// goroutine woken from a park pays for each frame it returns through,
	// since its stack and the return addresses are cold after the switch.
	done := ctx.Done()
	for {
		hook.At(hook.BeforePark)
		if done == nil && !s.barging() {
			// A context that can never be cancelled: in FIFO mode a plain
			// receive is cheaper than a select. (In barging mode the
			// select stays: a woken waiter goes round this loop again
			// when it loses, and the plain receive there parks the
			// goroutine differently, which costs more under contention.)
			<-w.ready.C()
		} else {
			select {
			case <-w.ready.C():
			case <-done:
				return s.withdraw(ctx, w, false, bubbled)
			}
		}
		// A done ctx wins over a wake-up that came after it: when both
		// are ready, select picks either, so look at ctx again now that
		// the wake-up is in hand.
		if isClosed(done) {
			return s.withdraw(ctx, w, true, bubbled)
		}
		hook.At(hook.AfterWake)
		if w.status() == granted {
			if bubbled {
				return s.tokenFor(n), nil // the record is not recycled
			}
			// The record stays with the permits until the token ends and
			// puts it back on the free list (see grantedOwner).
			return token.New((*grantedOwner)(w), n, w.gen.Load()), nil
		}
		if took, err := s.resolveWake(w, bubbled); took || err != nil {
			if err != nil {
				return token.Token{}, err
			}
			return s.tokenFor(n), nil
		}
	}
}

// TryAcquire takes n permits without blocking and reports whether it did.
// It follows Acquire's rules: it fails for invalid or too-large n, after
// Close, when fewer than n permits are available, and when it would overtake
// a parked waiter that the current limit admits: in FIFO mode always, in
// barging mode while the semaphore has turned to hand-off (see Fairness).
// On failure it returns the zero Token and changes nothing. TryAcquire(0)
// succeeds unless the semaphore is closed. It is a run-time error to call
// TryAcquire on a nil *Semaphore; the panic's message begins "atomicsem: ".
func (s *Semaphore) TryAcquire(n int64) (token.Token, bool) {
	if s == nil {
		panic(nilSemaphore("TryAcquire"))
	}
	if 0 < n && n <= MaxPermits {
		if c := s.cache; c != nil {
			home := c.home()
			if c.stripes[home].take(n) {
				return s.cachedTokenFor(n, home), true
			}
			return s.tryAcquireCached(n, home)
		}
		if s.acquireFast(n) {
			return s.tokenFor(n), true
		}
	}
	return s.tryAcquireSlow(n)
}

// acquireFast is the fast path of Acquire and TryAcquire: it takes n permits
// if nothing blocks an arrival and n are free. A CAS that loses to another
// goroutine retries while that still holds, rather than falling to the
// queue lock. It requires 0 < n ≤ MaxPermits, so that held + n cannot
// overflow, and it is small enough to be inlined into both callers.
func (s *Semaphore) acquireFast(n int64) bool {
	for {
		old := s.load()
		held := old.Held() + n
		if old >= s.block || held > old.Limit() {
			return false
		}
		hook.At(hook.BeforeCAS)
		if s.cas(old, old.WithHeld(held)) {
			return true
		}
	}
}

// tryAcquireSlow is TryAcquire's slow path: the fast path has already
// refused every n > 0, for want of permits, because the semaphore is closed,
// or because a waiter that must not be overtaken is queued (eligible in
// FIFO mode, starving in barging mode). So only a request for nothing can
// succeed, and no lock is needed.
func (s *Semaphore) tryAcquireSlow(n int64) (token.Token, bool) {
	s.made()
	if n != 0 || s.load().Closed() {
		return token.Token{}, false
	}
	return token.Empty(), true
}

// queueBehind is the arrival of a contended FIFO hand-off: it queues a
// record for n permits behind the waiters already queued when one of them
// fits under the limit (the word shows eligible), and returns it;
// otherwise it returns nil, and Acquire goes on to acquireSlow. Acquire has
// checked n's range and the context. Under mu, with eligible set, the
// fairness policy can only say "queue" and the word already says so; of
// acquireSlow's checks only the maximum is left (a request above it goes on
// to acquireSlow for its error).
func (s *Semaphore) queueBehind(n int64, bubbled bool) *waiter {
	if s.barging() || !s.load().Eligible() {
		return nil // a hint, without the lock: checked again under it
	}
	hook.At(hook.BeforeQueue)
	s.mu.Lock()
	if old := s.load(); !old.Eligible() || n > s.max {
		s.mu.Unlock()
		return nil
	}
	w := s.free.getLocked(s, n, bubbled)
	s.enqueueLocked(w, false)
	s.mu.Unlock()
	return w
}

// acquireSlow is the rest of Acquire before it parks. It fails, takes the
// n permits (returning a nil record), or queues a record for Acquire to
// park on.
func (s *Semaphore) acquireSlow(ctx context.Context, n int64, bubbled bool) (*waiter, error) {
	s.made()
	if err := s.checkRequest(n); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n == 0 {
		// Nothing to wait for, not even in debt or behind a queue.
		if s.load().Closed() {
			return nil, ErrClosed
		}
		return nil, nil
	}
	if s.barging() && s.spinFor(n) {
		return nil, nil
	}
	s.mu.Lock()
	s.drainLocked() // no waiter parks beside cached permits
	took, err := s.takeOrQueueLocked(n, nil)
	if took || err != nil {
		s.mu.Unlock()
		return nil, err
	}
	w := s.free.getLocked(s, n, bubbled)
	if s.barging() {
		s.queue.stampArrival(w)
	}
	s.enqueueLocked(w, false)
	s.mu.Unlock()
	return w, nil
}

// checkRequest validates n against MaxPermits and the semaphore's maximum.
func (s *Semaphore) checkRequest(n int64) error {
	return semcontract.CheckRequest(n, s.max, ErrInvalidPermits, ErrExceedsMax)
}

// spinFor is a barging arrival's last try before the queue: while another
// core may be about to return permits, it watches the word for n to come
// free and takes them, as sync.Mutex spins before it parks, so that a
// permit held for a moment does not cost a park and a wake-up. It gives up
// at once on a closed semaphore, during hand-off, or if n is above the
// limit, and otherwise after a few tries.
func (s *Semaphore) spinFor(n int64) bool {
	if !multicore {
		return false // on one CPU the holder of the permits cannot run meanwhile
	}
	for try := 0; try < spinTries; try++ {
		hook.At(hook.Spin)
		for range spinLoads {
			old := s.load()
			if old >= s.block || n > old.Limit() {
				return false
			}
			if old.Available() >= n {
				break
			}
		}
		if s.acquireFast(n) {
			return true
		}
	}
	return false
}

// Spinning's budget: spinTries CAS attempts, each after at most spinLoads
// loads of the word, the same order as sync.Mutex's four rounds of 30 pause
// instructions. multicore is whether spinning can ever pay.
const (
	spinTries = 4
	spinLoads = 30
)

var multicore = runtime.NumCPU() > 1

// takeOrQueueLocked takes n permits if the fairness policy allows it now;
// otherwise it sets the queue state and, when w is not nil, queues w again
// in its place by arrival (a woken waiter that lost the race). It returns
// ErrClosed on a closed semaphore. It requires that s.mu is held.
func (s *Semaphore) takeOrQueueLocked(n int64, w *waiter) (took bool, err error) {
	for {
		old := s.load()
		if old.Closed() {
			return false, ErrClosed
		}
		// A woken waiter (w != nil) takes free permits even if the
		// semaphore turned to hand-off after waking it: queueing again
		// with the permits free would strand them, as no release is on
		// its way to serve it.
		if s.mayTakeLocked(old, n) || (w != nil && old.Available() >= n) {
			if taken, ok := old.Acquire(n, state.ClosedBit); ok {
				if w != nil {
					// A woken waiter settles: with none left on its way,
					// the word turns eligible again if a waiter fits.
					eligible := s.fitsLocked(old) && (old.Starving() || !s.wakeOnItsWayLocked())
					taken = taken.WithQueue(state.QueueOf(old.Queued(), eligible, old.Starving()))
				}
				hook.At(hook.BeforeCAS)
				if s.cas(old, taken) {
					return true, nil
				}
				continue
			}
		}
		// Set the queue state before queueing, under mu, so that every
		// release and limit change from now on sees it and comes to serve
		// the queue. A request above the limit does not make the queue
		// eligible: no release can serve it, so arrivals need not queue
		// behind it. Nor does one queued while a woken waiter is on its
		// way (barging): that waiter serves the queue when it settles.
		// (The word's own eligible state cannot say whether a queued
		// waiter fits while one is on its way, nor just after the waiter
		// that was on its way has settled: the index does.)
		eligible := (s.fitsLocked(old) || n <= old.Limit()) &&
			(old.Starving() || !s.wakeOnItsWayLocked())
		queued := old.WithQueue(state.QueueOf(true, eligible, old.Starving()))
		hook.At(hook.BeforeCAS)
		if queued == old || s.cas(old, queued) {
			if w != nil {
				w.setStatusLocked(waiting)
				s.enqueueLocked(w, true)
				s.markStarvingLocked(w)
			}
			return false, nil
		}
	}
}

// mayTakeLocked reports whether an arrival may take n permits from old
// without overtaking a waiter it must not overtake. It requires that s.mu is
// held.
func (s *Semaphore) mayTakeLocked(old state.Word, n int64) bool {
	if old.Available() < n {
		return false
	}
	if s.barging() && !old.Starving() {
		return true
	}
	// FIFO, and barging during hand-off: only waiters that cannot fit under
	// the current limit may be overtaken, since no release could serve
	// them. Under mu the eligible state says exactly whether any other is
	// queued.
	return !old.Eligible()
}

func isDone(ctx context.Context) bool { return ctx.Err() != nil }

// isClosed reports whether done, a context's Done channel or nil, is
// closed, without blocking.
func isClosed(done <-chan struct{}) bool {
	if done == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}
