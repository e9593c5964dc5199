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

// Bug shape: a release that wakes the wrong waiter, wakes more or fewer than
// the permits serve, or lets a newcomer take permits meant for the queue.
func TestScenarioReleaseGrantsParkedWaitersInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 0, 4)
		var ps []*pendingAcquire
		for range 4 {
			ps = append(ps, park(t, s, t.Context(), 1))
		}

		require.True(t, s.TryRelease(1))
		synctest.Wait()
		requireReturned(t, ps, 0)
		requireGranted(t, ps[0], 1)

		// A newcomer must not overtake the queue, even for permits the
		// queue has not been handed yet.
		_, ok := s.TryAcquire(1)
		require.False(t, ok)

		require.True(t, s.TryRelease(2))
		synctest.Wait()
		requireReturned(t, ps, 0, 1, 2)

		ps[0].tok.Release()
		synctest.Wait()
		requireReturned(t, ps, 0, 1, 2, 3)
		require.Equal(t, atomicsem.Stats{Available: 0, Held: 3, Limit: 3, Max: 4}, s.Stats())
		for _, p := range ps[1:] {
			p.tok.Release()
		}
		require.Equal(t, atomicsem.Stats{Available: 3, Held: 0, Limit: 3, Max: 4}, s.Stats())
	})
}

// Bug shape: a release that wakes every waiter, or only the first, instead of
// exactly the prefix of the queue that the released permits satisfy.
func TestScenarioReleaseGrantsExactlyTheSatisfiablePrefix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 0, 8)
		var ps []*pendingAcquire
		for _, n := range []int64{1, 1, 3, 1} {
			ps = append(ps, park(t, s, t.Context(), n))
		}

		require.True(t, s.TryRelease(2))
		synctest.Wait()
		requireReturned(t, ps, 0, 1)
		requireGranted(t, ps[0], 1)
		requireGranted(t, ps[1], 1)
		require.Equal(t, atomicsem.Stats{Available: 0, Held: 2, Limit: 2, Max: 8, Waiters: 2}, s.Stats())

		// Two more are free, but the 3 at the front does not fit yet, and
		// the 1 behind it must not go first.
		require.True(t, s.TryRelease(2))
		synctest.Wait()
		requireReturned(t, ps, 0, 1)
		require.Equal(t, atomicsem.Stats{Available: 2, Held: 2, Limit: 4, Max: 8, Waiters: 2}, s.Stats())

		ps[0].tok.Release()
		synctest.Wait()
		requireReturned(t, ps, 0, 1, 2)
		requireGranted(t, ps[2], 3)
		require.Equal(t, atomicsem.Stats{Available: 0, Held: 4, Limit: 4, Max: 8, Waiters: 1}, s.Stats())

		ps[1].tok.Release()
		synctest.Wait()
		requireReturned(t, ps, 0, 1, 2, 3)
		requireGranted(t, ps[3], 1)
		ps[2].tok.Release()
		ps[3].tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 4, Held: 0, Limit: 4, Max: 8}, s.Stats())
	})
}

// Bug shape (golang/go#37852): a waiter at the front that gives up leaves
// the waiters behind it parked although the permits they need are free.
func TestScenarioCancelledFrontWaiterWakesItsSuccessor(t *testing.T) {
	tests := []struct {
		name string
		ctx  func(context.Context) (context.Context, func()) // the front waiter's
		end  func(cancel func())                             // makes that context done
	}{
		{
			name: "cancel",
			ctx: func(parent context.Context) (context.Context, func()) {
				return context.WithCancel(parent)
			},
			end: func(cancel func()) { cancel() },
		},
		{
			name: "deadline",
			ctx: func(parent context.Context) (context.Context, func()) {
				return context.WithTimeout(parent, time.Second)
			},
			end: func(func()) { time.Sleep(time.Second) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := mustNew(t, 2, 2)
				held := mustTake(t, s, 1)
				ctx, cancel := tt.ctx(t.Context())
				defer cancel()
				front := park(t, s, ctx, 2)
				next := park(t, s, t.Context(), 1)

				tt.end(cancel)
				synctest.Wait()
				require.True(t, front.returned())
				require.ErrorIs(t, front.err, ctx.Err())
				require.Zero(t, front.tok.Permits())
				requireGranted(t, next, 1)
				require.Equal(t, atomicsem.Stats{Available: 0, Held: 2, Limit: 2, Max: 2}, s.Stats())

				held.Release()
				next.tok.Release()
				require.Equal(t, atomicsem.Stats{Available: 2, Held: 0, Limit: 2, Max: 2}, s.Stats())
			})
		})
	}
}

// Bug shape: the weighted lost wake-up. A waiter at the front that asks for
// more than the limit, once the limit has been lowered under it, can never be
// served by a release; if it still held back the queue, the small waiter
// behind it would never be woken.
func TestScenarioWaiterAboveLoweredLimitDoesNotBlockOthers(t *testing.T) {
	tests := []struct {
		name  string
		lower func(t *testing.T, s *atomicsem.Semaphore, t1 *token.Token)
		// release are the tokens still to release, in order; W(1) must be
		// granted by the last one and not before.
		release  func(t1, t2 *token.Token) []*token.Token
		afterLow atomicsem.Stats
	}{
		{
			name: "SetLimit",
			lower: func(t *testing.T, s *atomicsem.Semaphore, _ *token.Token) {
				require.NoError(t, s.SetLimit(1))
			},
			release:  func(t1, t2 *token.Token) []*token.Token { return []*token.Token{t1, t2} },
			afterLow: atomicsem.Stats{Available: -1, Held: 2, Limit: 1, Max: 2, Waiters: 2},
		},
		{
			name:     "Forget",
			lower:    func(_ *testing.T, _ *atomicsem.Semaphore, t1 *token.Token) { t1.Forget() },
			release:  func(_, t2 *token.Token) []*token.Token { return []*token.Token{t2} },
			afterLow: atomicsem.Stats{Available: 0, Held: 1, Limit: 1, Max: 2, Waiters: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := mustNew(t, 2, 2)
				t1, t2 := mustTake(t, s, 1), mustTake(t, s, 1)
				ps := []*pendingAcquire{park(t, s, t.Context(), 2), park(t, s, t.Context(), 1)}

				tt.lower(t, s, t1)
				synctest.Wait()
				requireReturned(t, ps)
				require.Equal(t, tt.afterLow, s.Stats())

				toks := tt.release(t1, t2)
				for i, tok := range toks {
					tok.Release()
					synctest.Wait()
					if i < len(toks)-1 {
						requireReturned(t, ps)
					}
				}
				requireReturned(t, ps, 1)
				requireGranted(t, ps[1], 1)
				require.Equal(t, atomicsem.Stats{Available: 0, Held: 1, Limit: 1, Max: 2, Waiters: 1}, s.Stats())

				// W(2) kept its place: once the limit admits it again,
				// it is served as soon as its permits are free.
				require.NoError(t, s.SetLimit(2))
				synctest.Wait()
				requireReturned(t, ps, 1)
				ps[1].tok.Release()
				synctest.Wait()
				requireGranted(t, ps[0], 2)
				require.Equal(t, atomicsem.Stats{Available: 0, Held: 2, Limit: 2, Max: 2}, s.Stats())
				ps[0].tok.Release()
			})
		})
	}
}

// Bug shape: head-of-line blocking done wrong. A front waiter that fits the
// limit but not the free permits must hold back the smaller waiters behind
// it (and newcomers), or a stream of small requests starves it.
func TestScenarioFrontWaiterThatDoesNotFitYetHoldsBackOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 2, 2)
		t1, t2 := mustTake(t, s, 1), mustTake(t, s, 1)
		ps := []*pendingAcquire{park(t, s, t.Context(), 2), park(t, s, t.Context(), 1)}

		t1.Release()
		synctest.Wait()
		requireReturned(t, ps)
		_, ok := s.TryAcquire(1)
		require.False(t, ok, "a newcomer overtook the queue")
		require.Equal(t, atomicsem.Stats{Available: 1, Held: 1, Limit: 2, Max: 2, Waiters: 2}, s.Stats())

		t2.Release()
		synctest.Wait()
		requireReturned(t, ps, 0)
		requireGranted(t, ps[0], 2)

		ps[0].tok.Release()
		synctest.Wait()
		requireReturned(t, ps, 0, 1)
		requireGranted(t, ps[1], 1)
		ps[1].tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 2, Held: 0, Limit: 2, Max: 2}, s.Stats())
	})
}

// Bug shape: a limit lowered below what tokens hold either revokes them,
// loses the debt (Available clamped at zero, so the semaphore over-admits
// later), or forgets to wake the waiters when the limit comes back.
func TestScenarioUnthrottleAfterDebtWakesWaitersAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 4, 4)
		t1, t2 := mustTake(t, s, 1), mustTake(t, s, 1)

		require.NoError(t, s.SetLimit(0))
		require.Equal(t, atomicsem.Stats{Available: -2, Held: 2, Limit: 0, Max: 4}, s.Stats())
		ps := []*pendingAcquire{park(t, s, t.Context(), 1), park(t, s, t.Context(), 1)}

		t1.Release()
		synctest.Wait()
		requireReturned(t, ps)
		require.Equal(t, atomicsem.Stats{Available: -1, Held: 1, Limit: 0, Max: 4, Waiters: 2}, s.Stats())

		require.NoError(t, s.SetLimit(4))
		synctest.Wait()
		requireReturned(t, ps, 0, 1)
		requireGranted(t, ps[0], 1)
		requireGranted(t, ps[1], 1)
		require.Equal(t, atomicsem.Stats{Available: 1, Held: 3, Limit: 4, Max: 4}, s.Stats())

		t2.Release()
		ps[0].tok.Release()
		ps[1].tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 4, Held: 0, Limit: 4, Max: 4}, s.Stats())
	})
}

// Bug shape: over-release past the ceiling. TryRelease that checks only the
// available count, not the limit with the held permits, lets the limit pass
// the maximum once tokens come back.
func TestScenarioTryReleaseNeverPassesTheMaximum(t *testing.T) {
	type try struct {
		n  int64
		ok bool
	}
	tests := []struct {
		name         string
		initial, max int64
		take         []int64
		limit        int64 // SetLimit before the tries; -1 for none
		tries        []try
		want         atomicsem.Stats
	}{
		{
			name: "at max with tokens out", initial: 4, max: 4, take: []int64{2}, limit: -1,
			tries: []try{{1, false}},
			want:  atomicsem.Stats{Available: 2, Held: 2, Limit: 4, Max: 4},
		},
		{
			name: "held permits count against max", initial: 2, max: 4, take: []int64{2}, limit: -1,
			tries: []try{{3, false}, {2, true}, {1, false}},
			want:  atomicsem.Stats{Available: 2, Held: 2, Limit: 4, Max: 4},
		},
		{
			name: "in debt", initial: 4, max: 4, take: []int64{1, 2}, limit: 1,
			tries: []try{{4, false}, {3, true}, {1, false}},
			want:  atomicsem.Stats{Available: 1, Held: 3, Limit: 4, Max: 4},
		},
		{
			name: "not a positive count", initial: 1, max: 4, limit: -1,
			tries: []try{{0, false}, {-1, false}},
			want:  atomicsem.Stats{Available: 1, Held: 0, Limit: 1, Max: 4},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustNew(t, tt.initial, tt.max)
			var toks []*token.Token
			for _, n := range tt.take {
				toks = append(toks, mustTake(t, s, n))
			}
			if tt.limit >= 0 {
				require.NoError(t, s.SetLimit(tt.limit))
			}
			for _, try := range tt.tries {
				require.Equal(t, try.ok, s.TryRelease(try.n), "TryRelease(%d) with %+v", try.n, s.Stats())
			}
			require.Equal(t, tt.want, s.Stats())

			for _, tok := range toks {
				tok.Release()
			}
			got := s.Stats()
			require.Equal(t, got.Limit, got.Available)
			require.LessOrEqual(t, got.Limit, got.Max)
		})
	}
}

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
