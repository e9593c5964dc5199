package atomicsem_test

// Bug-shape scenarios: each test guards one known shape of semaphore bug,
// named in its comment, with a fixed script of steps. Most run in a
// testing/synctest bubble, where the set of waiters that have returned
// after each step is exact rather than a matter of timing (see park); the
// last two cross bubbles on purpose. The scenarios that must stop a
// goroutine at an exact point inside the semaphore use hooks and live in
// scenario_hooks_test.go.

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// Bug shape: a channel made in one testing/synctest bubble reused from
// another, or from outside any bubble, which the runtime treats as a fatal
// error. A pooled waiter record that carries its event's channel across
// bubbles makes the second test in a row that parks a waiter crash.
func TestScenarioWaitersParkInSuccessiveBubbles(t *testing.T) {
	parkAndGrant := func(t *testing.T, inBubble bool) {
		s := mustNew(t, 0, 1)
		p := goAcquire(t.Context(), s, 1)
		if inBubble {
			synctest.Wait()
		}
		awaitWaiters(s, 1)
		require.True(t, s.TryRelease(1))
		<-p.done
		requireGranted(t, p, 1)
		p.tok.Release()
	}
	for range 5 {
		t.Run("bubble", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { parkAndGrant(t, true) })
		})
	}
	t.Run("no bubble", func(t *testing.T) { parkAndGrant(t, false) })
}

// Bug shape: a semaphore shared by testing/synctest bubbles, as a
// package-level limiter is. A waiter record recycled from one bubble
// carries a channel made inside it; the next waiter to park on it from
// outside, or from another bubble, crashes the process ("receive on
// synctest channel from outside bubble"), and a record from outside parks
// a bubbled waiter on a channel that does not count as durably blocking,
// so the bubble's clock stops. One semaphore here goes through the
// outside, two bubbles, the outside again and a bubble again, in both
// modes, parking waiters (granted, timed out by the fake clock, released
// with records recycled) and waiting for idle in each.
func TestScenarioOneSemaphoreParksInsideAndOutsideBubbles(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := mustNew(t, 1, 2, opts...)
		// Each step parks three acquirers behind a held permit; each
		// releases its permit once granted, so that the records of those
		// granted by hand-off go back on the free list.
		acquireAndRelease := func(ctx context.Context) *pendingAcquire {
			p := &pendingAcquire{done: make(chan struct{})}
			go func() {
				defer close(p.done)
				var tok token.Token
				if tok, p.err = s.Acquire(ctx, 1); p.err == nil {
					tok.Release()
				}
			}()
			return p
		}
		outside := func(t *testing.T) {
			held := mustTake(t, s, 1)
			var ps []*pendingAcquire
			for range 3 {
				ps = append(ps, acquireAndRelease(t.Context()))
			}
			awaitWaiters(s, 3)
			idle := goWaitIdle(t.Context(), s)
			held.Release()
			for _, p := range ps {
				p.waitFor(t)
				require.NoError(t, p.err)
			}
			select {
			case err := <-idle:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("WaitIdle did not return after the last release")
			}
		}
		inside := func(t *testing.T) {
			// A waiter parked on a channel made outside the bubble is not
			// durably blocked, and synctest.Wait then waits for ever;
			// fail the run rather than hang it.
			watchdog := time.AfterFunc(20*time.Second, func() {
				panic("a synctest bubble is stuck: is a waiter parked on a channel made outside it?")
			})
			defer watchdog.Stop()
			synctest.Test(t, func(t *testing.T) {
				held := mustTake(t, s, 1)
				var ps []*pendingAcquire
				for range 3 {
					ps = append(ps, acquireAndRelease(t.Context()))
				}
				synctest.Wait()
				require.Equal(t, atomicsem.Stats{Available: 0, Held: 1, Limit: 1, Max: 2, Waiters: 3}, s.Stats())
				// Only durably blocked waiters let the fake clock run to
				// this deadline.
				ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
				defer cancel()
				timedOut := park(t, s, ctx, 1)
				time.Sleep(time.Hour)
				synctest.Wait()
				require.ErrorIs(t, timedOut.err, context.DeadlineExceeded)

				idle := goWaitIdle(t.Context(), s)
				held.Release()
				synctest.Wait()
				for _, p := range ps {
					require.True(t, p.returned())
					require.NoError(t, p.err)
				}
				require.NoError(t, <-idle)
			})
		}
		for i, step := range []func(*testing.T){outside, inside, inside, outside, inside, outside} {
			t.Run(fmt.Sprint("step=", i), step)
			require.Equal(t, atomicsem.Stats{Available: 1, Limit: 1, Max: 2}, s.Stats())
		}
		require.Empty(t, atomicsem.FreeListError(s))
	})
}
