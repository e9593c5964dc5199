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
			want      atomicsem.Stats
		}{
			{"some", 3, true, 7, atomicsem.Stats{Available: 5, Held: 2, Limit: 7, Max: 16}},
			{"all available", 8, true, 2, atomicsem.Stats{Available: 0, Held: 2, Limit: 2, Max: 16}},
			{"more than available", 9, false, 10, atomicsem.Stats{Available: 8, Held: 2, Limit: 10, Max: 16}},
			{"nothing reads the limit", 0, true, 10, atomicsem.Stats{Available: 8, Held: 2, Limit: 10, Max: 16}},
			{"negative", -1, false, 10, atomicsem.Stats{Available: 8, Held: 2, Limit: 10, Max: 16}},
			{"above MaxPermits", atomicsem.MaxPermits + 1, false, 10, atomicsem.Stats{Available: 8, Held: 2, Limit: 10, Max: 16}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := mustNew(t, 10, 16, opts...)
				tok := mustTake(t, s, 2)
				limit, ok := s.TryForget(tt.n)
				require.Equal(t, tt.wantOK, ok)
				require.Equal(t, tt.wantLimit, limit)
				require.Equal(t, tt.want, s.Stats())
				tok.Release()
				require.Equal(t, atomicsem.Stats{Available: tt.want.Limit, Limit: tt.want.Limit, Max: 16}, s.Stats(),
					"held permits come back in full")
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
	require.Equal(t, atomicsem.Stats{Available: 4, Held: 0, Limit: 4, Max: 4, Closed: true}, s.Stats())
}

// In FIFO mode TryForget never takes permits that a parked waiter under the
// limit is owed, even when enough are free for both.
func TestTryForgetDoesNotOvertakeAnEligibleWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 4, 8)
		first := mustTake(t, s, 3)
		p := park(t, s, t.Context(), 2) // 1 free: it parks, eligible
		_, ok := s.TryForget(1)
		require.False(t, ok, "TryForget overtook a parked waiter")
		requireQueueFlags(t, s)
		first.Release()
		synctest.Wait()
		requireGranted(t, p, 2)
		p.tok.Release()
		_, ok = s.TryForget(1)
		require.True(t, ok)
		require.Equal(t, atomicsem.Stats{Available: 3, Held: 0, Limit: 3, Max: 8}, s.Stats())
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
			p := park(t, s, ctx, 6) // above the limit of 4: not eligible
			limit, ok := s.TryForget(3)
			require.True(t, ok)
			require.Equal(t, int64(1), limit)
			requireQueueFlags(t, s)
			require.Equal(t, atomicsem.Stats{Available: 1, Held: 0, Limit: 1, Max: 8, Waiters: 1}, s.Stats())
			require.True(t, s.TryRelease(5), "raise the limit to 6: the waiter fits")
			synctest.Wait()
			requireGranted(t, p, 6)
			p.tok.Forget()
			require.Equal(t, atomicsem.Stats{Available: 0, Held: 0, Limit: 0, Max: 8}, s.Stats())
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
		p := park(t, s, ctx, 4) // fits under the limit of 4: eligible
		_, ok := s.TryForget(1) // barging, not starving: may take the free one
		require.True(t, ok)
		requireQueueFlags(t, s) // the waiter for 4 is now above the limit of 3
		tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 3, Held: 0, Limit: 3, Max: 8, Waiters: 1}, s.Stats())
		cancel()
		synctest.Wait()
		require.ErrorIs(t, p.err, context.Canceled)
		requireQueueFlags(t, s)
	})
}
