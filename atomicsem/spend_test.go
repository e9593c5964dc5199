package atomicsem_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
)

// TryForget lowers the available count and the limit together, holds
// nothing, and reports the limit it left; a refusal changes nothing.
func TestTryForgetRetiresAvailablePermits(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		tests := []struct {
			name      string
			n         int64
			wantOK    bool
			wantLimit int64
			want      counts
		}{
			{"some", 3, true, 7, counts{Available: 5, Held: 2, Limit: 7}},
			{"all available", 8, true, 2, counts{Available: 0, Held: 2, Limit: 2}},
			{"more than available", 9, false, 10, counts{Available: 8, Held: 2, Limit: 10}},
			{"nothing reads the limit", 0, true, 10, counts{Available: 8, Held: 2, Limit: 10}},
			{"negative", -1, false, 10, counts{Available: 8, Held: 2, Limit: 10}},
			{"above MaxPermits", atomicsem.MaxPermits + 1, false, 10, counts{Available: 8, Held: 2, Limit: 10}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := mustNew(t, 10, 16, opts...)
				tok := mustTake(t, s, 2)
				limit, ok := s.TryForget(tt.n)
				require.Equal(t, tt.wantOK, ok)
				require.Equal(t, tt.wantLimit, limit)
				require.Equal(t, tt.want, countsOf(s))
				tok.Release()
				require.Equal(t, tt.want.Limit, s.Stats().Available, "held permits come back in full")
			})
		}
	})
}

// After Close, TryForget fails for any request, nothing included.
func TestTryForgetFailsAfterClose(t *testing.T) {
	s := mustNew(t, 4, 4)
	s.Close()
	for _, n := range []int64{0, 1, 4} {
		limit, ok := s.TryForget(n)
		require.False(t, ok, "TryForget(%d)", n)
		require.Equal(t, int64(4), limit)
	}
	require.Equal(t, counts{Available: 4, Held: 0, Limit: 4}, countsOf(s))
}

// In FIFO mode TryForget never takes permits that a parked waiter under the
// limit is owed, even when enough are free for both.
func TestTryForgetDoesNotOvertakeAnEligibleWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 4, 8)
		first := mustTake(t, s, 3)
		p := goAcquire(context.Background(), s, 2) // 1 free: it parks, eligible
		synctest.Wait()
		_, ok := s.TryForget(1)
		require.False(t, ok, "TryForget overtook a parked waiter")
		require.Empty(t, atomicsem.QueueFlagsError(s))
		first.Release()
		synctest.Wait()
		require.True(t, p.returned())
		require.NoError(t, p.err)
		p.tok.Release()
		_, ok = s.TryForget(1)
		require.True(t, ok)
		require.Equal(t, counts{Available: 3, Held: 0, Limit: 3}, countsOf(s))
	})
}

// A waiter that asks for more than the limit holds nobody back, so
// TryForget may take free permits beside it; the lower limit goes through
// the queue lock, and the queue state stays true to the queue.
func TestTryForgetBesideAWaiterAboveTheLimit(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := mustNew(t, 4, 8, opts...)
			ctx, cancel := context.WithCancel(context.Background())
			p := goAcquire(ctx, s, 6) // above the limit of 4: not eligible
			synctest.Wait()
			limit, ok := s.TryForget(3)
			require.True(t, ok)
			require.Equal(t, int64(1), limit)
			require.Empty(t, atomicsem.QueueFlagsError(s))
			require.Equal(t, 1, s.Stats().Waiters)
			require.True(t, s.TryRelease(5), "raise the limit to 6: the waiter fits")
			synctest.Wait()
			require.True(t, p.returned())
			require.NoError(t, p.err)
			p.tok.Forget()
			require.Equal(t, counts{Available: 0, Held: 0, Limit: 0}, countsOf(s))
			cancel()
		})
	})
}

// Lowering the limit under a parked waiter that fits can push it above the
// new limit; the queue state must then stop showing it eligible, or every
// arrival would queue behind a waiter no release can serve.
func TestTryForgetKeepsTheQueueStateTrue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 4, 8, atomicsem.WithBarging())
		tok := mustTake(t, s, 3)
		ctx, cancel := context.WithCancel(context.Background())
		p := goAcquire(ctx, s, 4) // fits under the limit of 4: eligible
		synctest.Wait()
		_, ok := s.TryForget(1) // barging, not starving: may take the free one
		require.True(t, ok)
		require.Empty(t, atomicsem.QueueFlagsError(s), "the waiter for 4 is now above the limit of 3")
		tok.Release()
		require.Equal(t, counts{Available: 3, Held: 0, Limit: 3}, countsOf(s))
		cancel()
		synctest.Wait()
		require.ErrorIs(t, p.err, context.Canceled)
		require.Empty(t, atomicsem.QueueFlagsError(s))
	})
}
