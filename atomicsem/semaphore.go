// Package atomicsem provides a weighted, context-aware semaphore whose
// counting state lives in one 64-bit word changed only by compare-and-swap,
// and whose permits are handed out as token guards.
//
// The semaphore tracks two numbers besides what is available: the live limit
// (permits in circulation, available plus held by tokens) and a fixed
// ceiling. Keeping the limit apart from what is available is what lets the
// limit move at run time without revoking anything: TryRelease adds permits
// only while the limit stays under the ceiling, however many tokens are out;
// SetLimit lowers it below what tokens hold, and acquirers then wait until
// enough tokens come back; Token.Forget retires permits for good.
package atomicsem

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"go.uber.org/atomic"

	"github.com/atomicsem/atomicsem/internal/hook"
	"github.com/atomicsem/atomicsem/internal/mutant"
	"github.com/atomicsem/atomicsem/internal/state"
	"github.com/atomicsem/atomicsem/token"
)

var (
	// ErrClosed is returned by Acquire and SetLimit after Close.
	ErrClosed = errors.New("atomicsem: semaphore is closed")
	// ErrExceedsMax is returned (wrapped, with the numbers) when a request
	// or a limit is larger than the semaphore's maximum.
	ErrExceedsMax = errors.New("atomicsem: exceeds the semaphore's maximum")
	// ErrInvalidPermits is returned (wrapped, with the numbers) for a
	// negative request or one above MaxPermits, and by New for arguments
	// outside 0 ≤ initial ≤ max ≤ MaxPermits. (A limit above the maximum,
	// MaxPermits included, is ErrExceedsMax.)
	ErrInvalidPermits = errors.New("atomicsem: invalid number of permits")
)

// Semaphore is a weighted semaphore with a live limit that can move while
// permits are held.
//
// A Semaphore keeps three numbers in one atomic word: the permits Held by
// tokens, the live Limit, and the Max fixed at construction; Available is
// Limit − Held.
// Acquire and TryAcquire take permits and return a token.Token; the token's
// Release gives them back and its Forget retires them, lowering the limit.
// TryRelease adds new permits up to Max; SetLimit moves the limit anywhere in
// [0, Max] and never revokes a held token: after lowering it below what is
// held, Available is negative and acquirers wait until enough tokens return.
//
// # Fairness
//
// By default the semaphore is FIFO. While any waiter is parked, neither
// Acquire nor TryAcquire takes permits ahead of it; released permits are
// handed to the parked waiters in arrival order, and a waiter at the front
// that does not fit yet holds back those behind it, so a large request is
// never starved by a stream of small ones. The one exception: a waiter that
// asks for more than the current limit cannot be served by any release, so
// it does not hold back others; it keeps its place and competes from it as
// soon as the limit admits it.
//
// With WithBarging, arrivals may take free permits even while waiters are
// parked, and a release wakes as many front waiters as the free permits
// could serve, to compete for them instead of being handed them. This saves
// a context switch per permit under contention. An arrival that finds the
// permits taken spins briefly before it queues, as sync.Mutex does, when
// more than one CPU could be returning them. A woken waiter that loses
// goes back to its place in arrival order. Once the waiter that a release
// would serve next has waited longer than the starvation bound, the
// semaphore turns to FIFO hand-off; it turns back when it grants a waiter
// that has waited less than the bound, or when no waiter that fits under the
// limit is left.
//
// # Memory ordering
//
// A Release of a token synchronizes before the return of any Acquire or
// TryAcquire that obtains the released permits, in the sense of the Go memory
// model. The other calls that can admit an acquire (TryRelease, SetLimit,
// Forget) likewise synchronize before the acquires they admit.
//
// A Semaphore must be created with New; the zero value is not usable.
type Semaphore struct {
	// word is the packed state (see internal/state). It comes first so that it is
	// 64-bit aligned on 32-bit platforms.
	word atomic.Uint64

	mu    sync.Mutex
	queue waitQueue // guarded by mu
	wants wantIndex // the smallest request queued; guarded by mu
	// queued is the queue's length, for Stats; guarded by mu. It is a
	// plain field, not an atomic one that Stats could read without the
	// lock: that would cost two locked instructions per parked Acquire.
	queued int64

	free waiterFreeList // recycled waiter records

	// block holds the flags that stop a fast-path acquire: closed and, in
	// FIFO mode, eligible; in barging mode, starving instead of eligible
	// (so it also says which mode the semaphore is in: see barging). It
	// and the field after it never change after New. They come last, more
	// than a cache line's width after word on 64-bit platforms, so that
	// the fast path's read of block never touches word's line, which moves
	// between cores under contention: with block beside word, Parallel
	// cost 1.5× as much (docs/benchmarks.md, optimisation 10).
	block           state.Word
	starvationBound time.Duration
}

// barging reports whether s was made WithBarging. The mode is read from
// block rather than kept in a field of its own, which keeps the struct in
// its 112-byte size class.
func (s *Semaphore) barging() bool { return s.block&state.StarvingBit != 0 }

// New returns a semaphore with initial permits available and a ceiling of
// max. Both the available count and the limit start at initial, so a
// semaphore built below its ceiling can be raised later by TryRelease or
// SetLimit.
//
// New returns ErrInvalidPermits unless 0 ≤ initial ≤ max ≤ MaxPermits.
func New(initial, max int64, opts ...Option) (*Semaphore, error) {
	if initial < 0 || max > MaxPermits || initial > max {
		return nil, fmt.Errorf("%w: New(%d, %d) needs 0 ≤ initial ≤ max ≤ %d",
			ErrInvalidPermits, initial, max, MaxPermits)
	}
	cfg := config{starvationBound: DefaultStarvationBound}
	for _, opt := range opts {
		opt(&cfg)
	}
	s := &Semaphore{
		block:           state.ClosedBit | state.EligibleBit,
		starvationBound: cfg.starvationBound,
	}
	if cfg.barging {
		s.block = state.ClosedBit | state.StarvingBit
	}
	s.queue.lastArrival = math.MinInt64
	s.word.Store(uint64(state.New(initial, initial, max)))
	return s, nil
}

// Acquire blocks until n permits are granted, then returns a token holding
// them. Acquiring 0 permits succeeds at once with a token for nothing.
//
// On failure Acquire returns the zero Token and leaves the semaphore as if it
// had not been called:
//   - ErrInvalidPermits if n < 0 or n > MaxPermits;
//   - ErrExceedsMax if n is larger than the semaphore's maximum, since no
//     limit could ever admit it (a request above the current limit but within
//     the maximum waits for the limit to rise);
//   - ctx.Err() if ctx is done before the permits are granted, even when they
//     are free at the time of the call; permits granted in a race with the
//     cancellation are passed on to the next waiters;
//   - ErrClosed if the semaphore is closed, or is closed while Acquire waits;
//     if ctx is done as well, Acquire may return ctx.Err() instead, and does
//     when ctx was done before the call.
func (s *Semaphore) Acquire(ctx context.Context, n int64) (token.Token, error) {
	var w *waiter
	if 0 < n && n <= MaxPermits && !isDone(ctx) {
		if s.takeFree(n) {
			return s.tokenFor(n), nil
		}
		w = s.queueBehind(n)
	}
	if w == nil {
		var err error
		if w, err = s.acquireSlow(ctx, n); err != nil {
			return token.Token{}, err
		}
		if w == nil {
			if n == 0 {
				return emptyToken(), nil
			}
			return s.tokenFor(n), nil // taken under the lock
		}
	}
	// Parked. The waiter waits here, not in a function of its own: a
	// goroutine woken from a park pays for each frame it returns through
	// (its stack and return addresses are cold after the switch), and two
	// frames fewer made a contended hand-off 5–12 % cheaper
	// (docs/benchmarks.md, optimisation 9).
	done := ctx.Done()
	for {
		hook.At(hook.BeforePark)
		if done == nil && !s.barging() {
			// A context that can never be cancelled: in FIFO mode a plain
			// receive is cheaper than a select (with the lock-free free
			// list it made the hand-off 29 % cheaper). In barging mode it
			// measured twice as slow under contention at limit 1
			// (docs/benchmarks.md, optimisation 5), so it is not used.
			<-w.ready.C()
		} else {
			select {
			case <-w.ready.C():
			case <-done:
				return s.withdraw(ctx, w)
			}
		}
		hook.At(hook.AfterWake)
		if w.status == granted {
			if mutant.Active == mutant.RecycleGranted {
				s.recycle(w) // fault: the token below still carries w
			}
			// The record stays with the permits until the token's
			// Release puts it back on the free list (see grantedOwner).
			return token.New((*grantedOwner)(w), n), nil
		}
		if took, err := s.settleWake(w); took || err != nil {
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
// succeeds unless the semaphore is closed.
func (s *Semaphore) TryAcquire(n int64) (token.Token, bool) {
	if 0 < n && n <= MaxPermits && s.takeFree(n) {
		return s.tokenFor(n), true
	}
	return s.tryAcquireSlow(n)
}

// takeFree is the fast path of Acquire and TryAcquire: it takes n permits
// if nothing blocks an arrival and n are free. A CAS that loses to another
// goroutine retries while that still holds, rather than falling to the
// queue lock. It requires 0 < n ≤ MaxPermits, so that held + n cannot
// overflow, and it is small enough to be inlined into both callers.
func (s *Semaphore) takeFree(n int64) bool {
	for {
		old := s.load()
		held := old.Held() + n
		if old&s.block != 0 || held > old.Total() {
			return false
		}
		hook.At(hook.BeforeCAS)
		if s.cas(old, old.WithHeld(held)) {
			return true
		}
	}
}

// TryRelease adds n new permits, raising both the available count and the
// limit by n, and reports whether it did. It refuses, changing nothing, if
// n ≤ 0, if the semaphore is closed, or if the limit would exceed the
// maximum, counting permits held by tokens. Waiters that now fit are woken.
//
// TryRelease is for adding capacity (burst credit, unthrottling); permits
// taken by an acquire go back through their token's Release.
func (s *Semaphore) TryRelease(n int64) bool {
	if n <= 0 || n > MaxPermits {
		return false
	}
	return s.changeLimit(state.Word.TryRelease, n)
}

// SetLimit moves the live limit to limit in one step. Raising it makes the
// difference available at once and wakes waiters that now fit. Lowering it
// never revokes a held token: the available count drops, below zero if
// tokens hold more than the new limit, and acquirers wait until enough tokens
// come back.
//
// SetLimit returns ErrInvalidPermits if limit < 0, ErrExceedsMax if it is
// above the maximum, and ErrClosed after Close; in each case nothing changes.
func (s *Semaphore) SetLimit(limit int64) error {
	switch max := s.load().Max(); {
	case limit < 0:
		return fmt.Errorf("%w: SetLimit(%d)", ErrInvalidPermits, limit)
	case limit > max:
		return fmt.Errorf("%w: SetLimit(%d) with max %d", ErrExceedsMax, limit, max)
	}
	if !s.changeLimit(state.Word.SetLimit, limit) {
		return ErrClosed // the only refusal left for a limit within [0, max]
	}
	return nil
}

// Close closes the semaphore. Every parked Acquire returns ErrClosed, and
// later Acquire, TryAcquire, TryRelease and SetLimit calls fail. Tokens
// already handed out may still be released or forgotten, so Stats keeps
// accounting for them. Closing a closed semaphore does nothing.
func (s *Semaphore) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		old := s.load()
		new, ok := old.Close()
		if !ok {
			return
		}
		hook.At(hook.BeforeCAS)
		if s.cas(old, new.WithQueue(false, false, false)) {
			break
		}
	}
	for w := s.queue.head; w != nil; w = s.queue.head {
		s.removeLocked(w)
		w.status = closed
		w.ready.Set()
	}
}

// Stats is a snapshot of a semaphore's state.
type Stats struct {
	Available int64 // permits free now; negative while the limit is below Held
	Held      int64 // permits held by live tokens
	Limit     int64 // the live limit: Available + Held
	Max       int64 // the ceiling fixed by New
	Waiters   int   // parked acquirers
	Closed    bool
}

// Stats returns a snapshot of the semaphore, taken under the queue lock:
// Available, Held, Limit, Max and Closed come from one load of the state
// word, so they are consistent with each other, and Waiters is the length of
// the queue at that moment. It waits for the lock as a parking Acquire does,
// briefly; it is meant for monitoring and tests, not for a hot path.
func (s *Semaphore) Stats() Stats {
	s.mu.Lock()
	st := s.statsOf(s.load(), s.queued)
	s.mu.Unlock()
	return st
}

// statsOf decodes w into a Stats with the given number of waiters.
func (s *Semaphore) statsOf(w state.Word, waiters int64) Stats {
	return Stats{
		Available: w.Count(),
		Held:      w.Held(),
		Limit:     w.Total(),
		Max:       w.Max(),
		Waiters:   int(waiters),
		Closed:    w.Closed(),
	}
}

// A transition is one of the word's transitions, as a method expression of
// state.Word: state.Word.Release, state.Word.SetLimit and so on.
type transition = func(w state.Word, arg int64) (state.Word, bool)

// changeLimit applies a transition that moves the limit (TryRelease,
// SetLimit, Forget) and reports whether it was accepted. With no waiter
// queued it is one CAS. With waiters queued the limit decides which of them
// a release could serve, so the change is made under mu, together with the
// eligible flag that says so and the serving of the waiters it admits.
func (s *Semaphore) changeLimit(change transition, arg int64) bool {
	for {
		old := s.load()
		new, ok := change(old, arg)
		if !ok {
			return false
		}
		if old.Queued() && mutant.Active != mutant.LimitLockFree {
			return s.serve(change, arg)
		}
		hook.At(hook.BeforeCAS)
		if s.cas(old, new) {
			return true
		}
	}
}

func (s *Semaphore) load() state.Word { return state.Word(s.word.Load()) }
func (s *Semaphore) cas(old, new state.Word) bool {
	if mutant.Active == mutant.NonAtomic {
		// Fault for scripts/mutants.sh, compiled out otherwise: compare
		// and store in two steps.
		if s.word.Load() != uint64(old) {
			return false
		}
		s.word.Store(uint64(new))
		return true
	}
	return s.word.CompareAndSwap(uint64(old), uint64(new))
}
func isDone(ctx context.Context) bool             { return ctx.Err() != nil }
func (s *Semaphore) tokenFor(n int64) token.Token { return token.New((*owner)(s), n) }

// releaseToken and forgetToken are never called. They are here for the
// compiler, which inlines a function from another package only if it can
// read the function's body, and reads bodies from the export data of the
// packages the caller imports: those carry the bodies of their own
// inlinable functions and of the functions these call. A caller that ends
// the tokens Acquire returns but never names token.Token does not import
// package token, so without these two (inlinable, calling Release and
// Forget) its Release was a call; with them a TryAcquire+Release costs
// 12 % less (docs/benchmarks.md, optimisation 14).
//
//lint:ignore U1000 kept for the bodies they bring into the export data
func releaseToken(t *token.Token) { t.Release() }

//lint:ignore U1000 kept for the bodies they bring into the export data
func forgetToken(t *token.Token) { t.Forget() }

// emptyToken returns a token for no permits. Its owner does nothing, so
// ending it touches neither the word nor the lock.
func emptyToken() token.Token { return token.New(noPermits{}, 0) }

// noPermits is the owner of the tokens that acquires of 0 return.
type noPermits struct{}

func (noPermits) ReturnPermits(int64) {}
func (noPermits) ForgetPermits(int64) {}

// checkRequest validates n against MaxPermits and the semaphore's maximum.
func (s *Semaphore) checkRequest(n int64) error {
	if n < 0 || n > MaxPermits {
		return fmt.Errorf("%w: %d is outside [0, %d]", ErrInvalidPermits, n, MaxPermits)
	}
	if max := s.load().Max(); n > max {
		return fmt.Errorf("%w: requested %d, max %d", ErrExceedsMax, n, max)
	}
	return nil
}

// queueBehind is the arrival of a contended FIFO hand-off: it queues a
// record for n permits behind the waiters already queued when one of them
// fits under the limit (the eligible flag), and returns it; otherwise it
// returns nil, and Acquire goes on to acquireSlow. Acquire's fast path has
// checked n's range and the context, and under mu, with eligible set, the
// fairness policy can only say "queue" and the flags already say so; so
// what is left of acquireSlow's checks is the maximum, read from the word
// loaded under the lock (a request above it goes on to acquireSlow for its
// error). Together with the release's hand-off decided in one frame
// (handBack), that made a limit-1 hand-off 12 % cheaper against chan, with
// one P and with two (docs/benchmarks.md, optimisation 17).
func (s *Semaphore) queueBehind(n int64) *waiter {
	if s.barging() || !s.load().Eligible() {
		return nil // a hint, without the lock: checked again under it
	}
	s.mu.Lock()
	if old := s.load(); !old.Eligible() || old.Closed() || n > old.Max() {
		s.mu.Unlock()
		return nil
	}
	w := s.free.getLocked(s, n)
	s.enqueueLocked(w, false)
	s.mu.Unlock()
	return w
}

// acquireSlow is Acquire's slow path, outlined so that the fast path can be
// inlined. It fails, takes the n permits (returning a nil record), or
// queues a record for Acquire to park on.
func (s *Semaphore) acquireSlow(ctx context.Context, n int64) (*waiter, error) {
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
	took, err := s.takeOrQueueLocked(n, nil)
	if took || err != nil {
		s.mu.Unlock()
		return nil, err
	}
	w := s.free.getLocked(s, n)
	if s.barging() {
		s.queue.stampArrival(w)
	}
	s.enqueueLocked(w, false)
	s.mu.Unlock()
	return w, nil
}

// spinFor is a barging arrival's last try before the queue: while another
// core may be about to return permits, it watches the word for n to come
// free and takes them, as sync.Mutex spins before it parks. It gives up at
// once on a closed semaphore, during hand-off, or if n is above the limit,
// and otherwise after a few tries. With two Ps contending at limit 1 it
// cut the cost of an acquire by 61 % (docs/benchmarks.md, optimisation 13).
func (s *Semaphore) spinFor(n int64) bool {
	if !multicore || mutant.Active == mutant.NoSpin {
		return false // on one CPU the holder of the permits cannot run meanwhile
	}
	for try := 0; try < spinTries; try++ {
		hook.At(hook.Spin)
		for range spinLoads {
			old := s.load()
			if old&s.block != 0 || n > old.Total() {
				return false
			}
			if old.Count() >= n {
				break
			}
		}
		if s.takeFree(n) {
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

// withdraw settles a parked waiter whose ctx is done.
//
// A waiter granted its permits in a race with its ctx may not have been
// woken yet: handBack sets the event of a waiter it granted only after it
// releases mu. The waiter then receives that wake-up here, without the
// lock, before anything else is done with its record; otherwise the
// wake-up could land on the record after it was recycled, and wake the
// next Acquire to park on it. The wait is short: the releaser sets the
// event next, and waits for nothing before it does.
func (s *Semaphore) withdraw(ctx context.Context, w *waiter) (token.Token, error) {
	s.mu.Lock()
	if w.status == granted && !w.ready.TryWait() && mutant.Active != mutant.NoWaitForWake {
		s.mu.Unlock()
		<-w.ready.C()
		s.mu.Lock()
	}
	s.cancelLocked(w)
	s.free.putLocked(w)
	s.mu.Unlock()
	return token.Token{}, ctx.Err()
}

// settleWake settles a wake-up other than a hand-off's grant. After Close
// it returns ErrClosed. A waiter woken to compete for free permits (barging
// mode) takes them, or queues again in its place by arrival, keeping its
// waiting time; settleWake reports whether it took them. The record goes
// back to the free list unless the waiter queues again.
func (s *Semaphore) settleWake(w *waiter) (took bool, err error) {
	if w.status == closed {
		s.recycle(w)
		return false, ErrClosed
	}
	s.mu.Lock()
	took, err = s.takeOrQueueLocked(w.want(), w)
	if took || err != nil {
		s.free.putLocked(w)
	}
	s.mu.Unlock()
	return took, err
}

// cancelLocked withdraws a waiter whose ctx is done, leaving the semaphore
// as if the waiter had never arrived, and leaves w's event clear. It
// requires that s.mu is held and, if w was granted its permits, that its
// wake-up has been consumed (see withdraw).
func (s *Semaphore) cancelLocked(w *waiter) {
	switch w.status {
	case waiting:
		s.removeLocked(w)
		if mutant.Active == mutant.NoCancelNotify {
			return // fault: the waiters behind w are not served
		}
	case granted:
		// The grant raced the cancellation: pass the permits on. (withdraw
		// has consumed the wake-up.)
		if mutant.Active == mutant.LoseOnCancel {
			return // fault: the granted permits are dropped
		}
		// Return the permits and serve the queue with them in one CAS.
		s.releaseLocked(w.want())
		return
	case woken:
		// The wake-up was meant for w; pass it on.
		w.ready.TryWait()
	case closed:
		w.ready.TryWait()
		return
	}
	// Removing w may let the waiters behind it fit, and the flags must
	// stop counting it.
	s.dispatchLocked()
}

// takeOrQueueLocked takes n permits if the fairness policy allows it now;
// otherwise it sets the queue flags and, when w is not nil, queues w again
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
		if s.mayTakeLocked(old, n) || (w != nil && old.Count() >= n) {
			new, ok := old.Acquire(n, 0)
			if ok {
				hook.At(hook.BeforeCAS)
				if s.cas(old, new) {
					return true, nil
				}
				continue
			}
		}
		// Set the flags before queueing, under mu, so that every release
		// and limit change from now on sees them and comes to serve the
		// queue. A request above the limit leaves eligible as it is: no
		// release can serve it, so arrivals need not queue behind it.
		eligible := old.Eligible() || n <= old.Total()
		if mutant.Active == mutant.EligibleNotSet {
			eligible = old.Eligible() // fault: a waiter that fits is not counted
		}
		new := old.WithQueue(true, eligible, old.Starving())
		hook.At(hook.BeforeCAS)
		if new == old || s.cas(old, new) {
			if w != nil {
				w.status = waiting
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
	if old.Count() < n {
		return false
	}
	if s.barging() && !old.Starving() {
		return true
	}
	// FIFO, and barging during hand-off: only waiters that cannot fit under
	// the current limit may be overtaken, since no release could serve
	// them. Under mu the eligible flag says exactly whether any other is
	// queued.
	return !old.Eligible()
}

// tryAcquireSlow is TryAcquire's slow path: the fast path has already
// refused every n > 0, for want of permits, because the semaphore is closed,
// or because a waiter that must not be overtaken is queued (the eligible
// flag in FIFO mode, starving in barging mode, which implies eligible). So
// only a request for nothing can succeed, and no lock is needed.
func (s *Semaphore) tryAcquireSlow(n int64) (token.Token, bool) {
	if n != 0 || s.load().Closed() {
		return token.Token{}, false
	}
	return emptyToken(), true
}

// enqueueLocked queues w at the back, or, for a woken waiter going back to
// sleep (requeue), at its place in arrival order. It requires that s.mu is
// held and the queue flags set.
func (s *Semaphore) enqueueLocked(w *waiter, requeue bool) {
	s.wants.added(w.want(), s.queue.empty())
	if requeue {
		s.queue.insertByArrival(w)
	} else {
		s.queue.pushBack(w)
	}
	s.queued++
}

// removeLocked takes w off the queue. The queue flags may then say more
// than is true (the queue may be empty, or hold only waiters above the
// limit), which only sends other calls to the lock; the caller brings them
// up to date next, by serving the queue (Close has cleared them already).
// It requires that s.mu is held.
func (s *Semaphore) removeLocked(w *waiter) {
	s.queue.remove(w)
	s.wants.removed(w.want())
	s.queued--
}

// owner is the semaphore as its tokens see it. The type is unexported, so no
// caller can build a token that returns permits to a semaphore.
type owner Semaphore

// ReturnPermits implements token.Owner.
func (o *owner) ReturnPermits(n int64) {
	s := (*Semaphore)(o)
	if !s.giveBack(n) {
		s.returnSlow(n, nil)
	}
}

// ForgetPermits implements token.Owner.
func (o *owner) ForgetPermits(n int64) { (*Semaphore)(o).forgetPermits(n) }

// grantedOwner is the owner of a token that a parked Acquire was granted by
// hand-off: the waiter record it parked with. The record goes back to its
// semaphore's free list with the permits, under the queue lock that a
// release with waiters to serve takes anyway, so on the contended path the
// free list costs no atomic operation. The record is off the queue and its
// event clear.
type grantedOwner waiter

// ReturnPermits implements token.Owner.
func (g *grantedOwner) ReturnPermits(n int64) {
	w := (*waiter)(g)
	if w.sem.giveBack(n) {
		w.sem.recycle(w)
	} else {
		w.sem.returnSlow(n, w)
	}
}

// ForgetPermits implements token.Owner.
func (g *grantedOwner) ForgetPermits(n int64) {
	w := (*waiter)(g)
	w.sem.forgetPermits(n)
	w.sem.recycle(w)
}

// giveBack is the fast path of a token's Release: it returns n held
// permits in one CAS if no queued waiter fits under the limit, and reports
// whether it did. It is small enough to be inlined into both owners.
func (s *Semaphore) giveBack(n int64) bool {
	for {
		old := s.load()
		held := old.Held() - n
		if old.Eligible() || held < 0 {
			return false // serve the queue, or panic, in returnSlow
		}
		hook.At(hook.BeforeCAS)
		if s.cas(old, old.WithHeld(held)) {
			return true
		}
	}
}

// returnSlow returns n held permits while a queued waiter fits under the
// limit, and rec, the record of the parked Acquire they were granted to, or
// nil. It panics, changing nothing, if n is more than is held: a token's
// guard rules that out unless the token was ended by two goroutines at once,
// a data race in the caller.
func (s *Semaphore) returnSlow(n int64, rec *waiter) {
	if !s.barging() && mutant.Active != mutant.SkipWake {
		// FIFO hand-off. handBack checks n against what is held, under
		// the lock, so the word is not loaded here first.
		s.handBack(n, rec)
		return
	}
	for {
		old := s.load()
		new, ok := old.Release(n)
		if !ok {
			panic(errReturnExceedsHeld)
		}
		if mutant.Active == mutant.SkipWake {
			// Fault for scripts/mutants.sh: return the permits, wake nobody.
			if s.cas(old, new) {
				s.recycle(rec)
				return
			}
			continue
		}
		if !s.barging() || old.Starving() {
			// Hand-off (barging mode while starving): the front waiters
			// get the permits in the same step that returns them.
			s.handBack(n, rec)
			return
		}
		// Barging: return the permits without the lock, then wake the
		// front waiters to compete for them.
		hook.At(hook.BeforeCAS)
		if s.cas(old, new) {
			s.handBack(0, rec)
			return
		}
	}
}

// The panics of a token that returns or forgets more permits than are
// held, which only a token ended by two goroutines at once can do.
const (
	errReturnExceedsHeld = "atomicsem: returned permits exceed those held (was a token ended by two goroutines at once?)"
	errForgetExceedsHeld = "atomicsem: forgotten permits exceed those held (was a token ended by two goroutines at once?)"
)

// forgetPermits retires n held permits.
func (s *Semaphore) forgetPermits(n int64) {
	// A lower limit can let waiters that asked for more than it step aside
	// for the ones behind them: changeLimit serves the queue.
	if !s.changeLimit(state.Word.Forget, n) {
		panic(errForgetExceedsHeld)
	}
}

// recycle puts rec, a record coming back with its token's permits, on the
// free list; rec may be nil. Returning permits never waits for the lock
// only to recycle: a record that finds the lock busy goes on the free
// list's lock-free spill stack instead.
func (s *Semaphore) recycle(rec *waiter) {
	switch {
	case rec == nil:
	case s.mu.TryLock():
		s.free.putLocked(rec)
		s.mu.Unlock()
	default:
		s.free.putSpill(rec)
	}
}

// MaxPermits is the largest value for a semaphore's maximum, limit, or a
// single request: 2^20 − 1, the widest that the packed state word holds.
const MaxPermits = state.MaxPermits
