package atomicsem_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

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
