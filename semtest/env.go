package semtest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/token"
)

// patience bounds every wait of the suite in real time, so that a
// semaphore that stops granting fails its check instead of hanging the run.
const patience = 20 * time.Second

// env is one check's view of the implementation: how to make semaphores,
// park waiters on them and wait for quiescence.
type env struct {
	t      *testing.T
	c      *config
	newSem NewFunc

	mu      sync.Mutex
	handles map[Semaphore][]Semaphore // each semaphore's handles, itself first
	next    map[Semaphore]int         // the handle the next waiter parks on
	pending []*pending                // every Acquire started with goAcquire
}

func newEnv(t *testing.T, c *config, newSem NewFunc) *env {
	return &env{
		t:       t,
		c:       c,
		newSem:  newSem,
		handles: make(map[Semaphore][]Semaphore),
		next:    make(map[Semaphore]int),
	}
}

// new makes a semaphore that the check knows to be valid.
func (e *env) new(initial, max int64) Semaphore {
	e.t.Helper()
	s, err := e.newSem(e.t, initial, max)
	require.NoError(e.t, err, "New(%d, %d)", initial, max)
	require.NotNil(e.t, s, "semtest: the NewFunc returned a nil Semaphore and no error for New(%d, %d)", initial, max)
	e.mu.Lock()
	e.handles[s] = []Semaphore{s}
	e.mu.Unlock()
	return s
}

// handleFor returns the handle of s that the next parked waiter uses: with
// Join, three handles in turn.
func (e *env) handleFor(s Semaphore) Semaphore {
	if e.c.join == nil {
		return s
	}
	e.mu.Lock()
	hs := e.handles[s]
	i := e.next[s] % 3
	e.next[s]++
	e.mu.Unlock()
	if i < len(hs) {
		return hs[i]
	}
	h := e.c.join(e.t, s)
	e.mu.Lock()
	e.handles[s] = append(e.handles[s], h)
	e.mu.Unlock()
	return h
}

// pending is an Acquire running in its own goroutine.
type pending struct {
	ctx  context.Context
	done chan struct{} // closed when Acquire has returned
	tok  token.Token   // valid once done is closed
	err  error         // valid once done is closed
}

// goAcquire starts Acquire(ctx, n) on s in a new goroutine.
func (e *env) goAcquire(ctx context.Context, s Semaphore, n int64) *pending {
	p := &pending{ctx: ctx, done: make(chan struct{})}
	e.mu.Lock()
	e.pending = append(e.pending, p)
	e.mu.Unlock()
	go func() {
		defer close(p.done)
		p.tok, p.err = s.Acquire(ctx, n)
	}()
	return p
}

// returned reports whether the Acquire has returned, without blocking.
func (p *pending) returned() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitFor waits for the Acquire to return.
func (e *env) waitFor(p *pending) {
	e.t.Helper()
	select {
	case <-p.done:
	case <-time.After(patience):
		e.t.Fatal("Acquire did not return")
	}
}

// quiesce returns once every goroutine of the check has done what the last
// step let it do: every Acquire started has returned or is parked having
// seen every change. In a bubble it is synctest.Wait; otherwise it polls
// the handles' ParkCounter until the count of parked calls equals the count of
// calls that have not returned, and every call whose context is done has
// returned.
func (e *env) quiesce() {
	e.t.Helper()
	if e.c.bubble {
		synctest.Wait()
		return
	}
	deadline := time.Now().Add(patience)
	for {
		before, cancelled := e.unreturned()
		parked := e.parked()
		after, _ := e.unreturned()
		if before == after && after == parked && cancelled == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("semtest: did not quiesce: %d Acquire calls outstanding, %d parked, %d with a done context", after, parked, cancelled)
		}
		time.Sleep(time.Millisecond)
	}
}

// unreturned counts the Acquire calls that have not returned, and among
// them those whose context is done.
func (e *env) unreturned() (count, cancelled int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.pending {
		if !p.returned() {
			count++
			if p.ctx.Err() != nil {
				cancelled++
			}
		}
	}
	return count, cancelled
}

// parked sums ParkCounter.Parked over every handle of the check.
func (e *env) parked() int {
	e.mu.Lock()
	var all []Semaphore
	for _, hs := range e.handles {
		all = append(all, hs...)
	}
	e.mu.Unlock()
	sum := 0
	for _, h := range all {
		st, ok := h.(ParkCounter)
		if !ok {
			e.t.Fatalf("semtest: %T must implement ParkCounter, or the suite must run with InBubble", h)
		}
		sum += st.Parked()
	}
	return sum
}

// park starts Acquire(ctx, n) on s (or on one of its handles, with Join)
// and waits until it is parked, so that waiters started one after the
// other queue in that order.
func (e *env) park(s Semaphore, ctx context.Context, n int64) *pending {
	e.t.Helper()
	before := s.Stats().Waiters
	p := e.goAcquire(ctx, e.handleFor(s), n)
	e.quiesce()
	require.False(e.t, p.returned(), "Acquire(%d) should have parked", n)
	require.Equal(e.t, before+1, s.Stats().Waiters, "Acquire(%d) should be queued", n)
	return p
}

// requireReturned checks exactly which of ps have returned, by index.
func (e *env) requireReturned(ps []*pending, want ...int) {
	e.t.Helper()
	var got []int
	for i, p := range ps {
		if p.returned() {
			got = append(got, i)
		}
	}
	require.Equal(e.t, want, got, "indexes of the waiters that have returned")
}

// requireGranted checks that p returned a token for n permits.
func (e *env) requireGranted(p *pending, n int64) {
	e.t.Helper()
	require.True(e.t, p.returned(), "the Acquire of %d should have returned", n)
	require.NoError(e.t, p.err)
	require.Equal(e.t, n, p.tok.Permits())
}

// mustTake takes n permits that the check knows to be free.
func (e *env) mustTake(s Semaphore, n int64) *token.Token {
	e.t.Helper()
	tok, ok := s.TryAcquire(n)
	require.True(e.t, ok, "TryAcquire(%d) with %+v", n, s.Stats())
	return &tok
}

// background returns a context that is done when the check ends.
func (e *env) background() context.Context { return e.t.Context() }

// shortTimeout is how long a check lets an Acquire wait when it expects it
// to time out: a moment on the bubble's fake clock, and long enough in real
// time for a round trip to a server.
func (e *env) shortTimeout() time.Duration {
	if e.c.bubble {
		return 10 * time.Millisecond
	}
	return 50 * time.Millisecond
}

// requireImmediate checks, in a bubble, that no fake time passed since
// start: the call did not wait. Outside a bubble there is no exact clock,
// and the call's outcome (checked by the caller) is the evidence.
func (e *env) requireImmediate(start time.Time, msgAndArgs ...any) {
	e.t.Helper()
	if e.c.bubble {
		require.Zero(e.t, time.Since(start), msgAndArgs...)
	}
}

// counts is the part of Stats that a check states as an expectation.
type counts struct{ Available, Held, Limit int64 }

func countsOf(s Semaphore) counts {
	st := s.Stats()
	return counts{st.Available, st.Held, st.Limit}
}

// requireTokenPanic runs f and requires it to panic with a message in the
// token package's voice.
func requireTokenPanic(t *testing.T, f func()) {
	t.Helper()
	var msg string
	func() {
		defer func() {
			if r := recover(); r != nil {
				msg = fmt.Sprint(r)
			}
		}()
		f()
	}()
	require.True(t, strings.HasPrefix(msg, "token: "), "want a panic prefixed %q, got %q", "token: ", msg)
}

// awaitWaiters spins until n acquirers are queued on s, for checks that
// race real goroutines outside any bubble.
func (e *env) awaitWaiters(s Semaphore, n int) {
	e.t.Helper()
	deadline := time.Now().Add(patience)
	for s.Stats().Waiters < n {
		if time.Now().After(deadline) {
			e.t.Fatalf("%d waiters queued, want %d", s.Stats().Waiters, n)
		}
		runtime.Gosched()
	}
}
