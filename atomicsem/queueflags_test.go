package atomicsem_test

// The queue state in the word follows the queue: arrivals are held back
// exactly while a queued waiter fits under the limit. Also the paths that
// take no lock beside queued waiters, and the free list of waiter records.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// Bug shape: only a queued waiter that fits under the limit holds back
// arrivals, so the flag that says one is queued must follow the limit. A
// limit raised past an oversized waiter's request makes it one that a
// release could serve; if the flag stayed clear, an arrival would take the
// permits it is waiting for. (FIFO only: barging arrivals may take them.)
func TestRaisedLimitMakesAnOversizedWaiterHoldBackArrivals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 2, 8)
		a, b := mustTake(t, s, 1), mustTake(t, s, 1)
		large := park(t, s, t.Context(), 3)
		requireQueueFlags(t, s)

		// The limit rises to 4: two permits are free, the waiter
		// wants three and now fits the limit.
		require.NoError(t, s.SetLimit(4))
		requireQueueFlags(t, s)
		_, ok := s.TryAcquire(1)
		require.False(t, ok, "an arrival overtook a waiter that the raised limit admits: %+v", s.Stats())

		// One more permit back, and it is served.
		a.Release()
		synctest.Wait()
		requireGranted(t, large, 3)
		requireQueueFlags(t, s)
		large.tok.Release()
		b.Release()
		require.Equal(t, atomicsem.Stats{Available: 4, Limit: 4, Max: 8}, s.Stats())
	})
}

// Bug shape: the mirror image. A token forgotten while a waiter that fits
// is queued lowers the limit below that waiter's request; if the flag stayed
// set, arrivals would queue behind a waiter that no release can serve, with
// permits free.
func TestForgetThatLowersTheLimitBelowAWaiterLetsArrivalsPass(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := mustNew(t, 4, 8, opts...)
			big, small := mustTake(t, s, 2), mustTake(t, s, 1)
			waiter := park(t, s, t.Context(), 4)
			requireQueueFlags(t, s)

			big.Forget() // limit 2: the waiter for 4 no longer fits
			requireQueueFlags(t, s)
			tok, ok := s.TryAcquire(1)
			require.True(t, ok, "an oversized waiter held back an arrival: %+v", s.Stats())
			tok.Release()
			small.Release()

			// TryRelease brings the limit back to 4 with all of it free:
			// the waiter is served at once.
			require.True(t, s.TryRelease(2))
			synctest.Wait()
			requireGranted(t, waiter, 4)
			requireQueueFlags(t, s)
			waiter.tok.Release()
		})
	})
}

// Bug shape: a release that hands its permit to the front waiter and leaves
// behind it only a waiter above the limit. No queued waiter fits any more,
// so the eligible flag must clear, even though the hand-off changes no
// count; if it stayed set, every release and limit change would go to the
// queue lock for nothing, and the flags would say something false.
func TestHandOffThatLeavesOnlyAnOversizedWaiterClearsEligible(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := mustNew(t, 1, 4, opts...)
			holder := mustTake(t, s, 1)
			front := park(t, s, t.Context(), 1)
			ctx, cancel := context.WithCancel(t.Context())
			oversized := park(t, s, ctx, 2)
			requireQueueFlags(t, s)

			holder.Release()
			synctest.Wait()
			requireGranted(t, front, 1)
			requireQueueFlags(t, s)

			front.tok.Release()
			tok, ok := s.TryAcquire(1)
			require.True(t, ok, "a waiter above the limit held back an arrival: %+v", s.Stats())
			tok.Release()
			cancel()
			synctest.Wait()
			require.ErrorIs(t, oversized.err, context.Canceled)
			requireQueueFlags(t, s)
			require.Equal(t, atomicsem.Stats{Available: 1, Limit: 1, Max: 4}, s.Stats())
		})
	})
}

// Bug shape: a release that hands its permits to the front waiter as if
// nothing else were free. Here one permit is already free (the front waiter
// asks for two), so the two that come back serve the front waiter and the
// one behind it; granting only the front waiter would leave the second
// parked beside a free permit, with no release on its way to serve it.
func TestReleaseOnTopOfFreePermitsServesTheWaitersBehindTheFront(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := mustNew(t, 3, 3, opts...)
			one := mustTake(t, s, 1)
			two := mustTake(t, s, 2)
			front := park(t, s, t.Context(), 2)
			behind := park(t, s, t.Context(), 1)

			one.Release() // one free: not enough for the front waiter
			synctest.Wait()
			require.False(t, front.returned())
			require.False(t, behind.returned())

			two.Release()
			synctest.Wait()
			requireGranted(t, front, 2)
			requireGranted(t, behind, 1)
			requireQueueFlags(t, s)
			front.tok.Release()
			behind.tok.Release()
			require.Equal(t, atomicsem.Stats{Available: 3, Limit: 3, Max: 3}, s.Stats())
		})
	})
}

// Bug shape: the semaphore remembers the smallest queued request so that it
// need not walk the queue to learn whether any waiter fits under the limit.
// When the waiter that made it leaves, a stale memory either holds back
// arrivals that only oversized waiters stand before, or lets them overtake a
// waiter that fits.
func TestSmallestQueuedRequestIsFoundAgainAfterItLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 4, 8)
		var held []*token.Token
		for range 4 {
			held = append(held, mustTake(t, s, 1))
		}
		ctx, cancel := context.WithCancel(t.Context())
		small := park(t, s, ctx, 2)
		large := park(t, s, t.Context(), 3)

		// The smallest request leaves; the one left fits the limit of 4
		// but not the one free permit, so it holds back newcomers.
		cancel()
		synctest.Wait()
		require.ErrorIs(t, small.err, context.Canceled)
		held[0].Release()
		_, ok := s.TryAcquire(1)
		require.False(t, ok, "a newcomer overtook a waiter that fits the limit")

		// Under a limit of 2 the waiter for 3 cannot be served and must not
		// hold back anyone.
		require.NoError(t, s.SetLimit(2))
		for _, h := range held[1:] {
			h.Release()
		}
		tok, ok := s.TryAcquire(1)
		require.True(t, ok, "an oversized waiter held back a newcomer: %+v", s.Stats())
		tok.Release()
		require.False(t, large.returned())

		// It kept its place: raising the limit serves it.
		require.NoError(t, s.SetLimit(4))
		synctest.Wait()
		requireGranted(t, large, 3)
		large.tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 4, Held: 0, Limit: 4, Max: 8}, s.Stats())
	})
}

// The queue flags stay exact under a random concurrent mix of every
// operation, including requests above the limit, cancellations and limit
// changes in both directions. A checker takes the queue lock now and then
// and compares the flags with the queue.
func TestQueueFlagsStayExactUnderConcurrentChurn(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		const maxPermits = 8
		s := mustNew(t, 4, maxPermits, opts...)
		ctx, stop := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer stop()

		var wg sync.WaitGroup
		for g := range 6 {
			wg.Go(func() { churn(ctx, s, uint64(g)) })
		}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(99, 0))
			for ctx.Err() == nil {
				if rng.IntN(2) == 0 {
					_ = s.SetLimit(rng.Int64N(maxPermits + 1))
				} else {
					s.TryRelease(1)
				}
				time.Sleep(20 * time.Microsecond)
			}
		})
		checks, problems := 0, map[string]int{}
		for ctx.Err() == nil {
			if msg := atomicsem.QueueFlagsError(s); msg != "" {
				problems[msg]++
			}
			checks++
			time.Sleep(10 * time.Microsecond)
		}
		wg.Wait()
		require.Empty(t, problems, "after %d checks", checks)
		requireQueueFlags(t, s)
		require.Empty(t, atomicsem.FreeListError(s))
		require.Zero(t, s.Stats().Waiters)
		t.Logf("%d checks", checks)
	})
}

// Waiters that ask for more than the limit set only the queued flag, which
// neither the fast paths nor a token's Release look at: with such a waiter
// parked and the queue lock held elsewhere, Acquire, TryAcquire (taking and
// refusing) and Release all finish. This is what keeps them lock-free
// beside oversized waiters (README, docs/design.md).
func TestFastPathsBesideOversizedWaitersTakeNoLock(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := mustNew(t, 2, 8, opts...)
		ctx, cancel := context.WithCancel(t.Context())
		oversized := goAcquire(ctx, s, 3)
		awaitWaiters(s, 1)

		unlock := atomicsem.LockQueue(s)
		done := make(chan error, 1)
		go func() {
			tok, err := s.Acquire(t.Context(), 1)
			if err != nil {
				done <- err
				return
			}
			try, ok := s.TryAcquire(1)
			if !ok {
				done <- fmt.Errorf("TryAcquire(1) with a permit free failed")
				return
			}
			if _, ok := s.TryAcquire(1); ok {
				done <- fmt.Errorf("TryAcquire(1) with no permit free succeeded")
				return
			}
			try.Release()
			tok.Release()
			done <- nil
		}()
		select {
		case err := <-done:
			unlock()
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			unlock()
			t.Fatal("a fast path beside an oversized waiter waited for the queue lock")
		}
		cancel()
		<-oversized.done
		require.Equal(t, atomicsem.Stats{Available: 2, Limit: 2, Max: 8}, s.Stats())
	})
}

// A token granted to a parked Acquire takes the waiter record back to the
// free list on Release or Forget, but it does not wait for the queue lock to
// do so: with nobody left to serve and the lock held elsewhere, both finish,
// the records go to the free list's lock-free spill stack, and the semaphore
// stays exact. Parking works on afterwards, taking the records from there.
func TestEndingParkedGrantsDoesNotWaitForTheLock(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := mustNew(t, 2, 2, opts...)
		a, b := mustTake(t, s, 1), mustTake(t, s, 1)
		pa, pb := goAcquire(t.Context(), s, 1), goAcquire(t.Context(), s, 1)
		awaitWaiters(s, 2)
		a.Release()
		b.Release()
		for _, p := range []*pendingAcquire{pa, pb} {
			<-p.done
			require.NoError(t, p.err)
		}

		unlock := atomicsem.LockQueue(s)
		done := make(chan struct{})
		go func() {
			defer close(done)
			pa.tok.Release()
			pb.tok.Forget()
		}()
		select {
		case <-done:
			unlock()
		case <-time.After(10 * time.Second):
			unlock()
			t.Fatal("ending a parked grant waited for the queue lock")
		}
		require.Equal(t, atomicsem.Stats{Available: 1, Limit: 1, Max: 2}, s.Stats())
		require.Empty(t, atomicsem.FreeListError(s))

		grantedByHandOff(t, s, 1).tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 1, Limit: 1, Max: 2}, s.Stats())
		require.Empty(t, atomicsem.FreeListError(s))
	})
}

// A parked Acquire granted its permits by hand-off keeps its waiter record
// until its token ends; the record goes back on the free list then, and
// only then: listed while the token still carries it, it would go back a
// second time and be handed to two Acquires at once.
func TestParkedGrantReturnsItsRecordOnce(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := mustNew(t, 1, 1, opts...)
		for range 3 {
			p := grantedByHandOff(t, s, 1)
			require.Empty(t, atomicsem.FreeListError(s), "while the granted token is live")
			p.tok.Release()
			require.Empty(t, atomicsem.FreeListError(s), "after the granted token's Release")
		}
	})
}
