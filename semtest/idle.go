package semtest

import (
	"context"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/semcontract"
)

// idleChecks are WaitIdle's.
var idleChecks = []check{
	{name: "WaitIdleReturnsAtOnceWhenNothingIsHeld", f: waitIdleReturnsAtOnceWhenNothingIsHeld},
	{name: "WaitIdleWaitsForTheLastToken", f: waitIdleWaitsForTheLastToken},
	{name: "WaitIdleWhileThrottledToZero", f: waitIdleWhileThrottledToZero},
	{name: "WaitIdleWakesEveryWaiter", f: waitIdleWakesEveryWaiter},
	{name: "WaitIdleAfterCloseIsAGracefulShutdown", f: waitIdleAfterCloseIsAGracefulShutdown},
}

// idleCall is a WaitIdle running in its own goroutine.
type idleCall struct {
	done chan struct{}
	err  error
}

func goWaitIdle(ctx context.Context, s Semaphore) *idleCall {
	c := &idleCall{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = s.WaitIdle(ctx)
	}()
	return c
}

// returned reports whether the WaitIdle has returned, without blocking.
func (c *idleCall) returned() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// requireIdleBlocked checks that the WaitIdle c has not returned: in a
// bubble once everything is quiescent; outside one, while a WaitIdle with
// a short deadline times out (so some permit is still held).
func (e *env) requireIdleBlocked(s Semaphore, c *idleCall) {
	e.t.Helper()
	if e.c.bubble {
		synctest.Wait()
	} else {
		e.requireNotIdle(s, "permits are held")
	}
	require.False(e.t, c.returned(), "WaitIdle returned while permits are held: %v", c.err)
}

func (e *env) waitIdleReturns(c *idleCall) error {
	e.t.Helper()
	select {
	case <-c.done:
		return c.err
	case <-time.After(patience):
		e.t.Fatal("WaitIdle did not return")
		return nil
	}
}

// requireNotIdle checks that a WaitIdle with a short deadline times out:
// some permit is still held.
func (e *env) requireNotIdle(s Semaphore, msg string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.background(), e.shortTimeout())
	defer cancel()
	require.Equal(e.t, context.DeadlineExceeded, s.WaitIdle(ctx), msg)
}

// With nothing held WaitIdle returns nil at once, whatever waits and
// whatever the limit.
func waitIdleReturnsAtOnceWhenNothingIsHeld(e *env) {
	s := e.new(2, 4)
	ctx, cancel := context.WithTimeout(e.background(), patience)
	defer cancel()
	start := time.Now()
	require.NoError(e.t, s.WaitIdle(ctx))
	e.requireImmediate(start, "WaitIdle waited on an idle semaphore")
	done, cancelDone := context.WithCancel(e.background())
	cancelDone()
	require.NoError(e.t, s.WaitIdle(done), "nothing to wait for, so the done context does not matter")

	// A waiter above the limit holds nothing.
	wctx, cancelWaiter := context.WithCancel(e.background())
	big := e.park(s, wctx, 3)
	require.NoError(e.t, s.SetLimit(0))
	start = time.Now()
	require.NoError(e.t, s.WaitIdle(ctx))
	e.requireImmediate(start, "WaitIdle waited for a waiter")
	cancelWaiter()
	e.quiesce()
	require.ErrorIs(e.t, big.err, context.Canceled)
	s.Close()
	require.NoError(e.t, s.WaitIdle(ctx), "closed and idle")
}

// The x/sync idiom for a drain, Acquire(ctx, max), hangs while the limit
// is throttled below the maximum; WaitIdle does not care about the limit.
func waitIdleWhileThrottledToZero(e *env) {
	s := e.new(4, 4)
	a, b := e.mustTake(s, 1), e.mustTake(s, 3)
	require.NoError(e.t, s.SetLimit(0))
	idle := goWaitIdle(e.background(), s)
	e.requireIdleBlocked(s, idle)
	a.Release()
	e.requireIdleBlocked(s, idle)
	b.Release()
	require.NoError(e.t, e.waitIdleReturns(idle))
	require.Equal(e.t, Stats{Limit: 0, Max: 4}, s.Stats())
}

// Several callers may wait at once, and the last release wakes them all;
// one whose context ends leaves the others waiting.
func waitIdleWakesEveryWaiter(e *env) {
	s := e.new(3, 3)
	tok := e.mustTake(s, 2)
	var idle []*idleCall
	for range 3 {
		idle = append(idle, goWaitIdle(e.background(), s))
	}
	ctx, cancel := context.WithCancel(e.background())
	quitter := goWaitIdle(ctx, s)
	e.requireIdleBlocked(s, quitter)
	cancel()
	require.Equal(e.t, context.Canceled, e.waitIdleReturns(quitter))
	for _, c := range idle {
		e.requireIdleBlocked(s, c)
	}
	tok.Release()
	for _, c := range idle {
		require.NoError(e.t, e.waitIdleReturns(c))
	}
}

// WaitIdle returns once the last permit out comes back, by Release or by
// Forget, and not before; it takes nothing and blocks no acquirer.
func waitIdleWaitsForTheLastToken(e *env) {
	s := e.new(4, 4)
	a, b := e.mustTake(s, 1), e.mustTake(s, 2)
	idle := goWaitIdle(e.background(), s)
	e.requireIdleBlocked(s, idle)

	// WaitIdle takes no permits and blocks nobody: an acquire while it
	// waits is served, and delays it until it comes back too.
	c := e.mustTake(s, 1)
	a.Release()
	b.Release()
	e.requireIdleBlocked(s, idle)
	require.Equal(e.t, counts{Available: 3, Held: 1, Limit: 4}, countsOf(s))

	c.Forget()
	require.NoError(e.t, e.waitIdleReturns(idle))
	require.Equal(e.t, counts{Available: 3, Held: 0, Limit: 3}, countsOf(s))

	// A context that ends first wins, with its error unwrapped.
	d := e.mustTake(s, 3)
	ctx, cancel := context.WithCancel(e.background())
	cancelled := goWaitIdle(ctx, s)
	cancel()
	require.Equal(e.t, context.Canceled, e.waitIdleReturns(cancelled))
	d.Release()
}

// Close, then WaitIdle, lets every holder finish.
func waitIdleAfterCloseIsAGracefulShutdown(e *env) {
	s := e.new(3, 3)
	a := e.mustTake(s, 2)
	s.Close()
	idle := goWaitIdle(e.background(), s)
	e.requireIdleBlocked(s, idle)
	_, err := s.Acquire(e.background(), 1)
	require.ErrorIs(e.t, err, semcontract.ErrClosed)
	a.Release()
	require.NoError(e.t, e.waitIdleReturns(idle))
	require.Equal(e.t, Stats{Available: 3, Held: 0, Limit: 3, Max: 3, Closed: true}, s.Stats())
}
