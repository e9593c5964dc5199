package semtest

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/semcontract"
	"github.com/atomicsem/atomicsem/token"
)

// bubbleChecks share one semaphore between the outside and
// testing/synctest bubbles, as a package-level limiter is shared by tests
// that run in bubbles. Each is a shape in which a channel made on one side
// could end up used on the other, which the runtime treats as a fatal
// error that no recover catches ("receive on synctest channel from outside
// bubble"), or in which a waiter in a bubble could park on a channel made
// outside it, which the runtime does not count as durably blocked, so that
// the bubble's clock stops. They run outside any bubble, make the
// semaphore there, and enter bubbles themselves; they need InBubble.
//
// One direction is not checked because the runtime forbids it for every
// blocking primitive: a goroutine outside a bubble waking a goroutine of
// the bubble that is durably blocked (see testing/synctest: waking a
// goroutine blocked on sync.Cond.Wait from outside its bubble is a fatal
// error). A waiter parked in a bubble must be served from inside it.
var bubbleChecks = []check{
	{name: "BubbleReleasesToWaiterOutside", f: bubbleReleasesToWaiterOutside, bubbles: true},
	{name: "BubbleServesWaiterOutsideByLimitAndClose", f: bubbleServesWaiterOutsideByLimitAndClose, bubbles: true},
	{name: "BubbleEndsWaitIdleOutside", f: bubbleEndsWaitIdleOutside, bubbles: true},
	{name: "TokensCrossBubbles", f: tokensCrossBubbles, bubbles: true},
	{name: "WaitersParkInsideAndOutsideBubblesInTurn", f: waitersParkInsideAndOutsideBubblesInTurn, bubbles: true},
	{name: "WaitersParkInSuccessiveBubbles", f: waitersParkInSuccessiveBubbles, bubbles: true},
}

// bubbleRounds is how often the shapes that race an arrival against a
// release are repeated: the release must find the waiter at every stage of
// parking, before it has blocked as well as after.
const bubbleRounds = 1000

// inBubble runs f in a testing/synctest bubble, and fails the run instead of
// hanging it if the bubble's clock stops (a waiter in it parked on a
// channel made outside it is not durably blocked, so synctest.Wait waits
// for ever).
func (e *env) inBubble(f func(t *testing.T)) {
	e.t.Helper()
	watchdog := time.AfterFunc(patience, func() {
		panic("semtest: a synctest bubble is stuck: is a waiter in it parked on a channel made outside it?")
	})
	defer watchdog.Stop()
	synctest.Test(e.t, f)
}

// acquireOutside starts Acquire(ctx, n) on s in a goroutine outside any
// bubble, once start is closed; the token it gets is released at once.
func acquireOutside(ctx context.Context, s Semaphore, n int64, start <-chan struct{}) *pending {
	p := &pending{ctx: ctx, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		<-start
		var tok token.Token
		tok, p.err = s.Acquire(ctx, n)
		if p.err == nil {
			tok.Release()
		}
	}()
	return p
}

// spinForWaiters spins until s has n waiters, without blocking: inside a
// bubble a goroutine that blocks on something outside it, or sleeps, would
// let the bubble's clock or deadlock detection step in.
func spinForWaiters(t *testing.T, s Semaphore, n int) {
	deadline := time.Now().Add(patience) // real time outside a bubble; in one, Now does not move while nobody sleeps
	for i := 0; s.Stats().Waiters < n; i++ {
		if i%1024 == 0 && time.Now().After(deadline) {
			t.Fatalf("semtest: %d waiters, want %d", s.Stats().Waiters, n)
		}
		runtime.Gosched()
	}
}

// A waiter outside any bubble, served by a release inside one, at every
// stage of its parking: a semaphore that makes the waiter's channel in the
// releaser's goroutine makes it in the bubble.
func bubbleReleasesToWaiterOutside(e *env) {
	for range bubbleRounds {
		s := e.new(1, 1) // a fresh one each round: nothing recycled yet
		start := make(chan struct{})
		p := acquireOutside(e.background(), s, 1, start)
		e.inBubble(func(t *testing.T) {
			tok, ok := s.TryAcquire(1)
			require.True(t, ok)
			close(start)
			spinForWaiters(t, s, 1)
			tok.Release()
		})
		e.waitFor(p)
		require.NoError(e.t, p.err)
		require.Equal(e.t, counts{1, 0, 1}, countsOf(s))
	}
}

// A waiter outside any bubble, served by a raised limit and failed by
// Close, both made inside a bubble.
func bubbleServesWaiterOutsideByLimitAndClose(e *env) {
	for range bubbleRounds {
		s := e.new(0, 2)
		start := make(chan struct{})
		p := acquireOutside(e.background(), s, 1, start)
		e.inBubble(func(t *testing.T) {
			close(start)
			spinForWaiters(t, s, 1)
			require.True(t, s.TryRelease(1))
		})
		e.waitFor(p)
		require.NoError(e.t, p.err)
	}
	s := e.new(0, 2)
	start := make(chan struct{})
	p := acquireOutside(e.background(), s, 1, start)
	e.inBubble(func(t *testing.T) {
		close(start)
		spinForWaiters(t, s, 1)
		s.Close()
	})
	e.waitFor(p)
	require.ErrorIs(e.t, p.err, semcontract.ErrClosed)
}

// A WaitIdle outside any bubble, ended by the last release inside one.
func bubbleEndsWaitIdleOutside(e *env) {
	s := e.new(1, 1)
	for range bubbleRounds {
		var tok token.Token
		e.inBubble(func(t *testing.T) {
			var ok bool
			tok, ok = s.TryAcquire(1)
			require.True(t, ok)
		})
		idle := goWaitIdle(e.background(), s)
		e.inBubble(func(t *testing.T) { tok.Release() })
		require.NoError(e.t, e.waitIdleReturns(idle))
	}
}

// Tokens taken on one side and ended on the other, in every combination,
// with waiters parked in the bubble served by the release of a token taken
// outside it.
func tokensCrossBubbles(e *env) {
	s := e.new(2, 2)
	outside, ok := s.TryAcquire(1)
	require.True(e.t, ok)
	var inside token.Token
	e.inBubble(func(t *testing.T) {
		inside, ok = s.TryAcquire(1)
		require.True(t, ok)
		p := e.goAcquireIn(t, s, 1)
		synctest.Wait()
		require.False(t, p.returned(), "Acquire should park with no permit free")
		outside.Release() // taken outside, ended inside: serves the bubble's waiter
		synctest.Wait()
		require.True(t, p.returned())
		require.NoError(t, p.err)
		p.tok.Release()
	})
	inside.Release() // taken inside, ended outside
	tok, err := s.Acquire(e.background(), 2)
	require.NoError(e.t, err)
	tok.Release()
	require.Equal(e.t, counts{2, 0, 2}, countsOf(s))
}

// goAcquireIn starts Acquire(ctx, n) on s in a goroutine of the calling
// bubble, whose t is given.
func (e *env) goAcquireIn(t *testing.T, s Semaphore, n int64) *pending {
	p := &pending{ctx: t.Context(), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.tok, p.err = s.Acquire(p.ctx, n)
	}()
	return p
}

// One semaphore through the outside, two bubbles, the outside again and a
// bubble again, parking waiters in each (granted, timed out by the fake
// clock, released), as a package-level limiter goes through a test run.
// A semaphore that recycles what its waiters park on must keep what was
// made in a bubble from being used anywhere else, and must not park a
// waiter in a bubble on anything made outside it: the step that times a
// waiter out by the fake clock stops if that waiter is not durably
// blocked.
func waitersParkInsideAndOutsideBubblesInTurn(e *env) {
	s := e.new(1, 2)
	acquireAndRelease := func(ctx context.Context) *pending {
		start := make(chan struct{})
		close(start)
		return acquireOutside(ctx, s, 1, start) // in the caller's bubble, if any
	}
	outside := func() {
		held := e.mustTake(s, 1)
		var ps []*pending
		for i := range 3 {
			ps = append(ps, acquireAndRelease(e.background()))
			e.awaitWaiters(s, i+1)
		}
		idle := goWaitIdle(e.background(), s)
		held.Release()
		for _, p := range ps {
			e.waitFor(p)
			require.NoError(e.t, p.err)
		}
		require.NoError(e.t, e.waitIdleReturns(idle))
	}
	inside := func() {
		e.inBubble(func(t *testing.T) {
			held, ok := s.TryAcquire(1)
			require.True(t, ok)
			var ps []*pending
			for range 3 {
				ps = append(ps, acquireAndRelease(t.Context()))
				synctest.Wait()
			}
			require.Equal(t, 3, s.Stats().Waiters)
			// Only durably blocked waiters let the fake clock run to this
			// deadline.
			ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
			defer cancel()
			late := acquireOutside(ctx, s, 1, closedChan())
			time.Sleep(2 * time.Hour)
			synctest.Wait()
			require.True(t, late.returned(), "an Acquire in a bubble did not time out by the fake clock")
			require.ErrorIs(t, late.err, context.DeadlineExceeded)
			idle := goWaitIdle(t.Context(), s)
			held.Release()
			synctest.Wait()
			for _, p := range ps {
				require.True(t, p.returned())
				require.NoError(t, p.err)
			}
			require.True(t, idle.returned())
			require.NoError(t, idle.err)
		})
	}
	for _, step := range []func(){outside, inside, inside, outside, inside, outside} {
		step()
		require.Equal(e.t, counts{1, 0, 1}, countsOf(s))
		require.Zero(e.t, s.Stats().Waiters)
	}
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// Waiters park in one bubble after another on the same semaphore, then
// outside: the second bubble in a row to park a waiter meets whatever the
// first left behind.
func waitersParkInSuccessiveBubbles(e *env) {
	s := e.new(0, 1)
	parkAndGrant := func(t *testing.T, bubble bool) {
		p := e.goAcquireIn(t, s, 1)
		if bubble {
			synctest.Wait()
		}
		spinForWaiters(t, s, 1)
		require.True(t, s.TryRelease(1))
		<-p.done
		require.NoError(t, p.err)
		p.tok.Release()
		require.NoError(t, s.SetLimit(0))
	}
	for range 5 {
		e.inBubble(func(t *testing.T) { parkAndGrant(t, true) })
	}
	parkAndGrant(e.t, false)
}
