package atomicsem_test

// WaitIdle: it returns when no permit is held, whatever the limit, and
// leaves no trace when it gives up.

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
)

// WaitIdle waits for every token out, released or forgotten, granted at
// once or to a parked Acquire, and for no longer. In FIFO mode a release
// hands its permits to the parked waiter in the same change of the word,
// so no permit-free moment passes in between; in barging mode the release
// returns them and wakes the waiter to compete for them, and WaitIdle sees
// that moment.
func TestWaitIdleReturnsWhenTheLastTokenEnds(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		barging := len(opts) > 0
		for _, lastEnd := range []string{"Release", "Forget"} {
			t.Run("last="+lastEnd, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := mustNew(t, 2, 3, opts...)
					a, b := mustTake(t, s, 1), mustTake(t, s, 1)
					parked := park(t, s, t.Context(), 2)
					idle := goWaitIdle(t.Context(), s)
					requireWaitIdleBlocked(t, idle)

					a.Release()
					requireWaitIdleBlocked(t, idle)
					b.Release() // parked's token is now the last out
					synctest.Wait()
					requireGranted(t, parked, 2)
					if barging {
						requireWaitIdleReturnedNil(t, idle)
						idle = goWaitIdle(t.Context(), s)
					}
					requireWaitIdleBlocked(t, idle)

					if lastEnd == "Release" {
						parked.tok.Release()
					} else {
						parked.tok.Forget()
					}
					requireWaitIdleReturnedNil(t, idle)
					requireQueueFlags(t, s)
					require.Zero(t, s.Stats().Held)
				})
			})
		}
	})
}

// Close, then WaitIdle, is a graceful shutdown: new acquires fail, the
// holders finish, and WaitIdle returns when the last of them has.
func TestCloseThenWaitIdleDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 2, 2)
		tok := mustTake(t, s, 2)
		s.Close()
		idle := goWaitIdle(t.Context(), s)
		requireWaitIdleBlocked(t, idle)
		_, err := s.Acquire(t.Context(), 1)
		require.ErrorIs(t, err, atomicsem.ErrClosed)
		tok.Release()
		requireWaitIdleReturnedNil(t, idle)
	})
}

// WaitIdle blocks no acquirer: permits taken while it waits delay it until
// they too come back. Several callers may wait at once; one release wakes
// them all.
func TestWaitIdleBlocksNoAcquirerAndWakesEveryWaiter(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := mustNew(t, 3, 3, opts...)
			first := mustTake(t, s, 1)
			var idle []<-chan error
			for range 3 {
				idle = append(idle, goWaitIdle(t.Context(), s))
			}
			synctest.Wait()
			second := mustTake(t, s, 2)
			first.Release()
			for _, done := range idle {
				requireWaitIdleBlocked(t, done)
			}
			second.Release()
			for _, done := range idle {
				requireWaitIdleReturnedNil(t, done)
			}
		})
	})
}

// A cancelled WaitIdle returns ctx.Err() and leaves no trace: the idle flag
// is cleared with the last waiter gone, and releases are lock-free again.
func TestCancelledWaitIdleLeavesNoTrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 2, 2)
		tok := mustTake(t, s, 1)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		other := goWaitIdle(t.Context(), s)
		idle := goWaitIdle(ctx, s)
		time.Sleep(time.Second)
		synctest.Wait()
		require.ErrorIs(t, <-idle, context.DeadlineExceeded)
		requireQueueFlags(t, s) // one waiter is left: the flag stays
		requireWaitIdleBlocked(t, other)

		ctx2, cancel2 := context.WithCancel(t.Context())
		again := goWaitIdle(ctx2, s)
		synctest.Wait()
		cancel2()
		synctest.Wait()
		require.ErrorIs(t, <-again, context.Canceled)

		tok.Release()
		requireWaitIdleReturnedNil(t, other)
		requireQueueFlags(t, s)

		// With nobody waiting for idle, a release to zero takes no lock.
		last := mustTake(t, s, 2)
		unlock := atomicsem.LockQueue(s)
		last.Release()
		unlock()
	})
}

// A release to zero with nobody waiting for idle stays on the fast path:
// one CAS, no lock, also after WaitIdle calls have come and gone.
func TestReleaseToZeroWithoutIdleWaitersTakesNoLock(t *testing.T) {
	s := mustNew(t, 1, 1)
	require.NoError(t, s.WaitIdle(context.Background()))
	tok := mustTake(t, s, 1)
	unlock := atomicsem.LockQueue(s)
	defer unlock()
	tok.Release()
}

// A WaitIdle that starts with nothing held returns nil before anything is
// acquired, and one that starts after the last release sees it; the one
// that waits sees the writes made before the release that ended it.
func TestWaitIdleSynchronizesAfterTheLastRelease(t *testing.T) {
	s := mustNew(t, 1, 1)
	for range 200 {
		tok := mustTake(t, s, 1)
		var shared int
		idle := goWaitIdle(context.Background(), s)
		go func() {
			shared = 42
			tok.Release()
		}()
		require.NoError(t, <-idle)
		require.Equal(t, 42, shared, "WaitIdle returned before the release it waited for")
	}
}

// Under churn, with WaitIdle callers that come, give up and succeed, and
// the limit moving: the idle flag is never left set with nothing held or
// with nobody waiting, and no caller is left asleep.
func TestWaitIdleUnderChurnKeepsTheIdleFlagExact(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := mustNew(t, 4, 8, opts...)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() { churn(ctx, s, uint64(i)) })
		}
		wg.Go(func() {
			r := rand.New(rand.NewPCG(7, 7))
			for ctx.Err() == nil {
				_ = s.SetLimit(r.Int64N(9))
			}
		})
		for i := range 4 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(i), 3))
				for ctx.Err() == nil {
					wctx, wcancel := context.WithTimeout(ctx, time.Duration(r.Int64N(200))*time.Microsecond)
					_ = s.WaitIdle(wctx)
					wcancel()
				}
			})
		}
		wg.Wait()
		requireQueueFlags(t, s)
		st := s.Stats()
		require.Zero(t, st.Held)
		require.Zero(t, st.Waiters)
	})
}
