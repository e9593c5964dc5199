// Package atomicsem provides a weighted, context-aware semaphore whose
// counting state lives in one 64-bit word changed only by compare-and-swap,
// and whose permits are handed out as token guards.
//
// The semaphore tracks two numbers besides what is available: the live limit
// (permits in circulation, available plus held by tokens) and a fixed
// ceiling. Keeping the limit apart from what is available is what lets the
// limit move at run time without revoking anything: TryRelease and Refill
// add permits only while the limit stays under the ceiling, however many
// tokens are out; SetLimit lowers it below what tokens hold, and acquirers
// then wait until enough tokens come back; Token.Forget retires permits for
// good.
package atomicsem

import (
	"math"
	"sync"
	"time"

	"sync/atomic"

	"github.com/atomicsem/atomicsem/internal/hook"
	"github.com/atomicsem/atomicsem/internal/state"
	"github.com/atomicsem/atomicsem/semcontract"
)

// MaxPermits is the largest value for a semaphore's maximum, limit, or a
// single request: 2^30 − 1, the widest that the packed state word holds.
// A budget of bytes up to a gigabyte can be counted in bytes; above that,
// count in KiB. It is semcontract.MaxPermits, which every implementation
// keeps to.
const MaxPermits = semcontract.MaxPermits

// The errors are package semcontract's, which every implementation
// matches, so errors.Is finds them whichever semaphore returned them.
var (
	// ErrClosed is returned by Acquire and SetLimit after Close.
	ErrClosed = semcontract.ErrClosed
	// ErrExceedsMax is returned (wrapped, with the numbers) when a request
	// or a limit is larger than the semaphore's maximum.
	ErrExceedsMax = semcontract.ErrExceedsMax
	// ErrInvalidPermits is returned (wrapped, with the numbers) for a
	// negative request or one above MaxPermits, and by New for arguments
	// outside 0 ≤ initial ≤ max ≤ MaxPermits. (A limit above the maximum,
	// MaxPermits included, is ErrExceedsMax.)
	ErrInvalidPermits = semcontract.ErrInvalidPermits
)

// Semaphore is a weighted semaphore with a live limit that can move while
// permits are held.
//
// A Semaphore keeps the permits Held by tokens and the live Limit in one
// atomic word, beside the Max fixed at construction; Available is
// Limit − Held. Acquire and TryAcquire take permits and return a
// token.Token; the token's Release gives them back and its Forget retires
// them, lowering the limit. TryRelease and Refill add new permits up to
// Max; SetLimit moves the limit anywhere in [0, Max] and never revokes a
// held token: after lowering it below what is held, Available is negative
// and acquirers wait until enough tokens return. WaitIdle waits until no
// permits are held.
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
// parked, and a release wakes as many front waiters as the permits it
// frees could serve, to compete for them instead of being handed them.
// This saves a context switch per permit under contention. While woken
// waiters are on their way to the permits, releases wake nobody more and
// take no lock; the waiters, once they have taken the permits or lost them,
// wake the next round, as sync.Mutex wakes no second waiter while one it
// woke is on its way. An arrival that finds the permits taken spins
// briefly before it queues, as sync.Mutex does, when more than one CPU
// could be returning them. A woken waiter that loses goes back to its
// place in arrival order. Once the waiter that a release
// would serve next has waited longer than the starvation bound, the
// semaphore turns to FIFO hand-off; it turns back when it grants a waiter
// that has waited less than the bound, or when no waiter that fits under the
// limit is left.
//
// # Many cores
//
// Every acquire and release changes the one word, whose cache line then
// moves to the core that made them. For a large limit checked on every
// request of a server with many cores, WithPermitCache keeps free permits
// in per-CPU caches instead, at the cost its documentation states.
//
// # Memory ordering
//
// A Release of a token synchronizes before the return of any Acquire or
// TryAcquire that obtains the released permits, in the sense of the Go memory
// model. The other calls that can admit an acquire (TryRelease, Refill,
// SetLimit, Forget) likewise synchronize before the acquires they admit, and
// the release that leaves no permit held synchronizes before the return of
// the WaitIdle calls it ends.
//
// A Semaphore must be created with New or MustNew. The zero value is not a
// semaphore: using it panics, and so does calling a method on a nil
// *Semaphore or passing a nil context.Context, each with a message that
// begins "atomicsem: " and names the method.
type Semaphore struct {
	// word is the packed state (see internal/state). It comes first so that it is
	// 64-bit aligned on 32-bit platforms.
	word atomic.Uint64

	mu    sync.Mutex
	queue waitQueue // guarded by mu
	idle  idleWaiters

	free waiterFreeList // recycled waiter records

	// The fields below never change after New. They come last, more than
	// a cache line's width after word on 64-bit platforms, so that the
	// fast path's read of block never touches word's line, which moves
	// between cores under contention.

	// block is the lowest word that stops a fast-path acquire: one that is
	// closed or eligible in FIFO mode, closed or starving in barging mode
	// (so it also says which mode the semaphore is in: see barging). It is
	// zero only in a Semaphore not made by New.
	block           state.Word
	max             int64
	starvationBound time.Duration
	cache           *permitCache // nil unless made WithPermitCache
}

// barging reports whether s was made WithBarging. The mode is read from
// block rather than kept in a field of its own, to keep the struct small.
func (s *Semaphore) barging() bool { return s.block == state.BlockBarging }

// New returns a semaphore with initial permits available and a ceiling of
// max. Both the available count and the limit start at initial, so a
// semaphore built below its ceiling can be raised later by TryRelease,
// Refill or SetLimit.
//
// New returns ErrInvalidPermits unless 0 ≤ initial ≤ max ≤ MaxPermits. It is
// a run-time error to pass a nil Option; the panic's message begins
// "atomicsem: ".
func New(initial, max int64, opts ...Option) (*Semaphore, error) {
	if err := semcontract.CheckNew(initial, max, ErrInvalidPermits); err != nil {
		return nil, err
	}
	cfg := config{starvationBound: DefaultStarvationBound}
	for _, opt := range opts {
		if opt == nil {
			panic("atomicsem: New called with a nil Option")
		}
		opt(&cfg)
	}
	s := &Semaphore{
		block:           state.BlockFIFO,
		max:             max,
		starvationBound: cfg.starvationBound,
	}
	if cfg.barging {
		s.block = state.BlockBarging
	}
	if cfg.cache {
		s.cache = newPermitCache(max)
		s.cache.on = initial >= s.cache.enableAt
		if !s.cache.on {
			for i := range s.cache.stripes {
				s.cache.stripes[i].word.Store(stripeOff)
			}
		}
	}
	s.queue.lastArrival = math.MinInt64
	s.word.Store(uint64(state.New(0, initial)))
	return s, nil
}

// MustNew is like New but panics if the arguments are invalid. It
// simplifies the initialisation of package-level semaphores:
//
//	var uploads = atomicsem.MustNew(4, 16)
func MustNew(initial, max int64, opts ...Option) *Semaphore {
	s, err := New(initial, max, opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// nilSemaphore and nilContext are what a method called on a nil *Semaphore,
// or with a nil context.Context, panics with: the method's name. The
// message is built only when it is printed, so each check is a compare and
// a branch that the call's first use of the argument needs in any case.
type (
	nilSemaphore string
	nilContext   string
)

func (m nilSemaphore) Error() string {
	return "atomicsem: " + string(m) + " called on a nil *Semaphore"
}

func (m nilContext) Error() string {
	return "atomicsem: " + string(m) + " called with a nil Context"
}

// errZeroSemaphore is what every method of a Semaphore not made by New
// panics with.
const errZeroSemaphore = "atomicsem: Semaphore used without New (the zero value is not usable)"

// made panics unless s was made by New. It costs a load of a field that
// never changes, and only the slow paths call it: the fast paths of a zero
// Semaphore, whose block is zero, always fall through to them.
func (s *Semaphore) made() {
	if s.block == 0 {
		panic(errZeroSemaphore)
	}
}

// TryRelease adds n new permits, raising both the available count and the
// limit by n, and reports whether it did. It refuses, changing nothing, if
// n ≤ 0, if the semaphore is closed, or if the limit would exceed the
// maximum, counting permits held by tokens. Waiters that now fit are woken.
//
// TryRelease is for adding capacity all at once or not at all (unthrottling
// by a fixed step); Refill adds what fits. Permits taken by an acquire go
// back through their token's Release.
func (s *Semaphore) TryRelease(n int64) bool {
	if s == nil {
		panic(nilSemaphore("TryRelease"))
	}
	_, ok := s.changeLimit(state.Word.TryRelease, n)
	return ok
}

// Refill adds up to n new permits, as many as the ceiling allows, and
// returns how many it added. Like TryRelease it raises both the available
// count and the limit, counts permits held by tokens against the maximum,
// and wakes waiters that now fit; it adds nothing, changing nothing, if
// n ≤ 0, if the semaphore is closed, or if the limit is already at the
// maximum.
//
// Refill is for credit that accrues up to a ceiling: called every tick with
// the tick's credit, it tops the semaphore up to its maximum and no
// further, however much of the credit was spent meanwhile.
func (s *Semaphore) Refill(n int64) (added int64) {
	if s == nil {
		panic(nilSemaphore("Refill"))
	}
	added, _ = s.changeLimit(state.Word.Refill, n)
	return added
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
	if s == nil {
		panic(nilSemaphore("SetLimit"))
	}
	s.made()
	if err := semcontract.CheckLimit(limit, s.max, ErrInvalidPermits, ErrExceedsMax); err != nil {
		return err
	}
	if s.cache != nil {
		// The cached permits go back to the word in the same hold of the
		// lock as the move, so that none is left for acquirers beyond a
		// lower limit.
		s.mu.Lock()
		s.drainLocked()
		_, ok := s.serveLocked(state.Word.SetLimit, limit)
		s.mu.Unlock()
		if !ok {
			return ErrClosed
		}
		return nil
	}
	if _, ok := s.changeLimit(state.Word.SetLimit, limit); !ok {
		return ErrClosed // the only refusal left for a limit within [0, max]
	}
	return nil
}

// Close closes the semaphore. Every parked Acquire returns ErrClosed, and
// later Acquire, TryAcquire, TryRelease, Refill and SetLimit calls fail.
// Tokens already handed out may still be released or forgotten, so Stats
// keeps accounting for them, and WaitIdle still waits for them: Close, then
// WaitIdle, is a graceful shutdown. Closing a closed semaphore does nothing.
func (s *Semaphore) Close() {
	if s == nil {
		panic(nilSemaphore("Close"))
	}
	s.made()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drainLocked()
	for {
		old := s.load()
		shut, ok := old.Close()
		if !ok {
			return
		}
		hook.At(hook.BeforeCAS)
		if s.cas(old, shut.WithQueue(state.Empty)) {
			break
		}
	}
	for w := s.queue.head; w != nil; w = s.queue.head {
		s.removeLocked(w)
		w.setStatusLocked(closed)
		w.ready.Set()
	}
}

// Stats is a snapshot of a semaphore's state: Available, Held, Limit, Max
// (the ceiling fixed by New), Waiters and Closed. It is semcontract.Stats,
// the shape every implementation reports.
type Stats = semcontract.Stats

// Stats returns a snapshot of the semaphore, taken under the queue lock:
// Available, Held, Limit and Closed come from one load of the state word,
// so they are consistent with each other, and Waiters is the length of the
// queue at that moment. For a semaphore made WithPermitCache, Held and
// Available also count the permits in the caches as available, read one
// cache after another after the word: exact at rest, and off by what moves
// between caches and tokens meanwhile. It waits for the lock as a parking
// Acquire does, briefly; it is meant for monitoring and tests, not for a
// hot path.
func (s *Semaphore) Stats() Stats {
	if s == nil {
		panic(nilSemaphore("Stats"))
	}
	s.made()
	s.mu.Lock()
	w := s.load()
	if s.cache != nil {
		// A refill may have filled a stripe read after the word that
		// counts it: never below zero.
		w = w.WithHeld(max(w.Held()-s.cached(), 0))
	}
	st := s.statsOf(w, s.queue.len)
	s.mu.Unlock()
	return st
}

// Held returns the permits held by tokens at one moment: one load of the
// state word, without the queue lock, so that a caller may read it on a
// hot path. A permit handed from a releasing token to a parked waiter
// counts as held throughout. The count may change as soon as it is read;
// after lowering the limit it may exceed Stats().Limit. For a semaphore
// made WithPermitCache it is the word's count less the permits in the
// caches, read one cache after another: exact at rest, and off by what
// moves between caches and tokens while it reads. It is a run-time
// error to call Held on a nil *Semaphore or on one not made by New; the
// panic's message begins "atomicsem: ".
//
// # Memory ordering
//
// Held is an atomic load: it observes every acquire and release whose
// change of the word synchronizes before it, and synchronizes with nothing
// itself.
func (s *Semaphore) Held() int64 {
	if s == nil {
		panic(nilSemaphore("Held"))
	}
	s.made()
	held := s.load().Held()
	if c := s.cache; c != nil {
		// What the word counts as held, less what the stripes hold.
		for i := range c.stripes {
			held -= int64(c.stripes[i].word.Load() &^ stripeOff)
		}
		held = max(held, 0)
	}
	return held
}

// statsOf decodes w into a Stats with the given number of waiters.
func (s *Semaphore) statsOf(w state.Word, waiters int64) Stats {
	return Stats{
		Available: w.Available(),
		Held:      w.Held(),
		Limit:     w.Limit(),
		Max:       s.max,
		Waiters:   int(waiters),
		Closed:    w.Closed(),
	}
}

// A transition is one of the word's limit moves, as a method expression of
// state.Word (state.Word.SetLimit, state.Word.Forget and so on), given its
// argument and the semaphore's maximum.
type transition = func(w state.Word, arg, max int64) (state.Word, bool)

// changeLimit applies a transition that moves the limit (TryRelease,
// Refill, SetLimit, Forget), reports whether it was accepted and returns
// how far it raised the limit. With no waiter queued it is one CAS. With
// waiters queued the limit decides which of them a release could serve, so
// the change is made under mu, together with the queue state that says so
// and the serving of the waiters it admits. A Forget that leaves no permit
// held while WaitIdle waits is made under mu too, to wake the idle waiters.
func (s *Semaphore) changeLimit(change transition, arg int64) (raised int64, ok bool) {
	for {
		old := s.load()
		changed, ok := change(old, arg, s.max)
		if !ok {
			s.made()
			return 0, false
		}
		if old.Queued() || (old.Idle() && changed.Held() == 0) {
			return s.serve(change, arg)
		}
		hook.At(hook.BeforeCAS)
		if s.cas(old, changed) {
			return changed.Limit() - old.Limit(), true
		}
	}
}

func (s *Semaphore) load() state.Word { return state.Word(s.word.Load()) }
func (s *Semaphore) cas(old, next state.Word) bool {
	return s.word.CompareAndSwap(uint64(old), uint64(next))
}
