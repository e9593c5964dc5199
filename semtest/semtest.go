// Package semtest is a conformance suite for semaphores that follow
// atomicsem's contract: weighted requests, tokens that are released,
// forgotten or split, cancellation through a context, a live limit that
// moves below what is held without revoking anything, a ceiling that counts
// held permits, Close, WaitIdle, and FIFO order with head-of-line blocking
// in which a request above the limit does not block others.
//
// An implementation runs the suite from one of its own tests:
//
//	func TestConformance(t *testing.T) {
//		semtest.Run(t, func(t *testing.T, initial, max int64) (semtest.Semaphore, error) {
//			return atomicsem.New(initial, max)
//		}, semtest.InBubble(), semtest.MemoryModel())
//	}
//
// The suite is the black-box behaviour of atomicsem.Semaphore, which
// satisfies Semaphore as it is and passes the suite in both of its modes,
// and of etcdsem, whose methods take a context and return errors, and which
// passes it through Remote, the adapter for such semaphores. Each
// check is a subtest named after the behaviour it pins down, so a failure
// names what is broken.
//
// The suite imports the contract (package semcontract), not an
// implementation of it. Errors are matched with errors.Is against the
// contract's sentinels (semcontract.ErrClosed, semcontract.ErrExceedsMax,
// semcontract.ErrInvalidPermits, which atomicsem re-exports), so an
// implementation's own errors must match them, through Unwrap or an Is
// method. A context's error must come back unwrapped.
//
// # Quiescence
//
// Most checks park waiters and then look at which of them have returned,
// which is only meaningful once every goroutine has done what the last
// step let it do. An implementation that can run inside a testing/synctest
// bubble says so with InBubble, and the suite quiesces it with synctest.Wait
// and runs its time-dependent checks on the bubble's fake clock. Any other
// implementation (one that talks to a server, say) must implement ParkCounter;
// the suite then quiesces it by polling, and the checks that need exact fake
// time are skipped.
//
// # Options
//
// The options declare where an implementation's promises differ from
// atomicsem's FIFO mode, and size the concurrent checks: Barging for
// arrivals that may take free permits ahead of parked waiters (and
// StarvationBound for how long they may), MemoryModel
// for an implementation whose Release synchronizes before the Acquire it
// admits in the sense of the Go memory model, Join for a backend shared by
// several handles, and Load and Rounds for the concurrent checks' size.
package semtest

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/atomicsem/atomicsem/semcontract"
	"github.com/atomicsem/atomicsem/token"
)

// Semaphore is the contract the suite checks, as atomicsem.Semaphore
// spells it. An implementation whose methods take a context and return
// errors (one that talks to a server) is checked through Remote, which
// supplies the context, turns a refusal error back into false, and fails
// the test with any other error.
type Semaphore interface {
	// Acquire blocks until n permits are granted, then returns a token
	// holding them.
	Acquire(ctx context.Context, n int64) (token.Token, error)
	// TryAcquire takes n permits without blocking and reports whether it
	// did.
	TryAcquire(n int64) (token.Token, bool)
	// TryRelease adds n new permits, raising the limit, and reports whether
	// it did.
	TryRelease(n int64) bool
	// Refill adds up to n new permits, as many as the ceiling allows, and
	// returns how many it added.
	Refill(n int64) int64
	// SetLimit moves the live limit.
	SetLimit(limit int64) error
	// Close closes the semaphore.
	Close()
	// Stats returns a consistent snapshot of the semaphore.
	Stats() Stats
	// WaitIdle blocks until no permits are held, or ctx is done.
	WaitIdle(ctx context.Context) error
}

// Stats is a snapshot of a semaphore's state: semcontract.Stats, which
// atomicsem.Stats is too.
type Stats = semcontract.Stats

// ParkCounter is implemented by a Semaphore that cannot run in a
// testing/synctest bubble, so that the suite can tell when every waiter
// has parked: when the semaphore is quiescent.
type ParkCounter interface {
	// Parked returns the number of Acquire calls parked on this handle
	// that have seen every change made to the semaphore so far and wait
	// for the next. It may count or leave out a call whose context is
	// done; the suite waits for those to return in any case. The suite
	// counts the semaphore quiescent when Parked, summed over its handles,
	// equals the number of its Acquire calls that have not returned.
	Parked() int
}

// Settler is the former name of ParkCounter.
//
// Deprecated: use ParkCounter.
type Settler = ParkCounter

// Forgetter is implemented by a Semaphore that can take available permits
// out of circulation without a token (atomicsem.Semaphore.TryForget); the
// suite then checks that too.
type Forgetter interface {
	// TryForget takes n available permits out of circulation at once,
	// lowering the limit, and reports whether it did, with the limit it
	// left (or found).
	TryForget(n int64) (limit int64, ok bool)
}

// NewFunc returns a semaphore with initial permits available (and as its
// limit) and a ceiling of max, or the error New would return: the suite
// passes invalid arguments too, and expects semcontract.ErrInvalidPermits for
// them. It is called inside the subtest, and inside its bubble under
// InBubble; t is the subtest's.
type NewFunc func(t *testing.T, initial, max int64) (Semaphore, error)

// JoinFunc returns another handle on the semaphore s (for a shared backend:
// another client of the same semaphore), which must behave as s does and
// implement ParkCounter if s does.
type JoinFunc func(t *testing.T, s Semaphore) Semaphore

// An Option declares a capability or a difference of an implementation, or
// sizes the suite.
type Option func(*config)

type config struct {
	bubble      bool
	barging     bool
	bound       time.Duration // the starvation bound of a barging semaphore
	memoryModel bool
	join        JoinFunc
	goroutines  int // concurrent workers in the load checks
	rounds      int // operations per worker in the load checks
	races       int // rounds of the grant-versus-cancel race
}

// InBubble declares that the semaphore can be made and used inside a
// testing/synctest bubble, with no goroutine outside it. The suite then
// quiesces with synctest.Wait and runs the checks that need exact fake time,
// and the checks that share one semaphore, made outside any bubble, between
// bubbles and the outside (a waiter outside served from inside a bubble,
// tokens ended on the other side, waiters parking in successive bubbles).
func InBubble() Option { return func(c *config) { c.bubble = true } }

// Barging declares that arrivals may take free permits ahead of parked
// waiters (atomicsem.WithBarging). The checks of strict FIFO order are
// skipped, and the check that arrivals do barge is run instead.
func Barging() Option { return func(c *config) { c.barging = true } }

// StarvationBound declares, for a barging semaphore, how long a parked
// waiter may lose to arrivals before the semaphore turns to handing permits
// to its waiters in order (atomicsem.WithStarvationBound). The check that a
// large request is not starved by a stream of small ones then runs in
// barging mode too, and requires the request to be served within three
// bounds.
func StarvationBound(d time.Duration) Option { return func(c *config) { c.bound = d } }

// MemoryModel declares that a token's Release synchronizes before the
// return of the Acquire or TryAcquire that obtains the released permits, in
// the sense of the Go memory model, and so do TryRelease and Forget. The
// suite then checks it under the race detector. A semaphore whose permits
// travel through a server cannot promise it: the race detector does not see
// the ordering that the network provides.
func MemoryModel() Option { return func(c *config) { c.memoryModel = true } }

// Join supplies other handles on the same semaphore. The suite then parks
// its waiters on three handles in turn, so that the order of grants, the
// wake-ups and Close are checked across handles. It is a run-time error to
// pass a nil JoinFunc; the panic's message begins "semtest: ".
func Join(join JoinFunc) Option {
	if join == nil {
		panic("semtest: Join called with a nil JoinFunc")
	}
	return func(c *config) { c.join = join }
}

// Load sizes the concurrent checks: goroutines workers of rounds operations
// each (the default is 16 and 1000). A semaphore that takes a round trip
// per operation runs them smaller.
func Load(goroutines, rounds int) Option {
	return func(c *config) { c.goroutines, c.rounds = goroutines, rounds }
}

// Rounds sets how many times the race between a grant and a cancellation
// is staged (the default is 1000).
func Rounds(n int) Option { return func(c *config) { c.races = n } }

// Run runs the suite against the semaphores newSem makes, each check in a
// subtest of t. It is a run-time error to pass a nil t, newSem or Option;
// the panic's message begins "semtest: ". A newSem that returns a nil
// Semaphore and no error fails the check that called it.
func Run(t *testing.T, newSem NewFunc, opts ...Option) {
	switch {
	case t == nil:
		panic("semtest: Run called with a nil *testing.T")
	case newSem == nil:
		panic("semtest: Run called with a nil NewFunc")
	}
	c := &config{goroutines: 16, rounds: 1000, races: 1000}
	for _, opt := range opts {
		if opt == nil {
			panic("semtest: Run called with a nil Option")
		}
		opt(c)
	}
	for _, ch := range checks {
		t.Run(ch.name, func(t *testing.T) {
			switch {
			case ch.fifo && c.barging:
				t.Skip("semtest: strict FIFO order; the semaphore barges")
			case ch.barging && !c.barging:
				t.Skip("semtest: barging only")
			case ch.fakeTime && !c.bubble:
				t.Skip("semtest: needs exact fake time (InBubble)")
			case ch.bubbles && !c.bubble:
				t.Skip("semtest: shares a semaphore between bubbles and the outside (InBubble)")
			case ch.memoryModel && !c.memoryModel:
				t.Skip("semtest: the semaphore does not promise the Go memory model's ordering")
			}
			if c.bubble && !ch.realTime && !ch.bubbles {
				synctest.Test(t, func(t *testing.T) { ch.f(newEnv(t, c, newSem)) })
				return
			}
			ch.f(newEnv(t, c, newSem))
		})
	}
}

// A check is one behaviour of the contract.
type check struct {
	name        string
	f           func(e *env)
	fifo        bool // holds only for strict FIFO order
	barging     bool // holds only for a barging semaphore
	fakeTime    bool // needs exact fake time
	realTime    bool // runs real goroutines against real time, outside any bubble
	bubbles     bool // enters bubbles itself, with a semaphore made outside them
	memoryModel bool // needs the Go memory model's ordering
}

// checks is the suite, in the order it runs.
var checks = concat(basicChecks, limitChecks, forgetChecks, idleChecks, fairnessChecks, loadChecks, bubbleChecks)

func concat(lists ...[]check) []check {
	var all []check
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}
