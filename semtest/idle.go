package semtest

import (
	"context"
	"time"

	"github.com/stretchr/testify/require"
)

// idleChecks are WaitIdle's.
var idleChecks = []check{
	{name: "WaitIdleReturnsAtOnceWhenNothingIsHeld", f: waitIdleReturnsAtOnceWhenNothingIsHeld},
	{name: "WaitIdleWaitsForTheLastToken", f: waitIdleWaitsForTheLastToken},
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

	// A waiter above the limit holds nothing.
	wctx, cancelWaiter := context.WithCancel(e.background())
	big := e.park(s, wctx, 3)
	require.NoError(e.t, s.SetLimit(0))
	start = time.Now()
	require.NoError(e.t, s.WaitIdle(ctx))
	e.requireImmediate(start, "WaitIdle waited for a waiter")
	cancelWaiter()
	e.settle()
	require.ErrorIs(e.t, big.err, context.Canceled)
}

// WaitIdle returns once the last permit out comes back, by Release or by
// Forget, and not before; it takes nothing and blocks no acquirer.
func waitIdleWaitsForTheLastToken(e *env) {
	s := e.new(4, 4)
	a, b := e.mustTake(s, 1), e.mustTake(s, 2)
	idle := goWaitIdle(e.background(), s)
	e.requireNotIdle(s, "two tokens out")

	// WaitIdle takes no permits and blocks nobody: an acquire while it
	// waits is served, and delays it until it comes back too.
	c := e.mustTake(s, 1)
	a.Release()
	b.Release()
	e.requireNotIdle(s, "one token out")
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
	e.requireNotIdle(s, "a token is out")
	a.Release()
	require.NoError(e.t, e.waitIdleReturns(idle))
	require.Equal(e.t, Stats{Available: 3, Held: 0, Limit: 3, Max: 3, Closed: true}, s.Stats())
}
