package atomicsem_test

// The limit and its ceiling: MaxPermits, SetLimit below and above what is
// held, TryRelease, Refill, and Forget, which lowers the limit.

import (
	"context"
	"math"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// MaxPermits is 2^30 − 1, so that a budget of a billion bytes is exact.
func TestMaxPermitsHoldsABillionBytes(t *testing.T) {
	require.Equal(t, int64(1<<30-1), int64(atomicsem.MaxPermits))
	s := mustNew(t, 1e9, 1e9)
	tok, ok := s.TryAcquire(512 << 20)
	require.True(t, ok)
	require.Equal(t, atomicsem.Stats{Available: 1e9 - 512<<20, Held: 512 << 20, Limit: 1e9, Max: 1e9}, s.Stats())
	tok.Release()
}

// Every count the API takes, at MaxPermits − 1, MaxPermits and
// MaxPermits + 1: nothing wraps, and what is out of range gets the
// documented error (or false, or 0) with nothing changed.
func TestBoundariesAtMaxPermits(t *testing.T) {
	const top = atomicsem.MaxPermits
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := mustNew(t, 0, top, opts...)

		// Adding permits: up to exactly MaxPermits, never past it.
		require.False(t, s.TryRelease(top+1))
		require.True(t, s.TryRelease(top-1))
		require.False(t, s.TryRelease(2), "limit would be MaxPermits + 1")
		require.Equal(t, int64(1), s.Refill(top+1), "Refill adds only what fits")
		require.Zero(t, s.Refill(top))
		require.Zero(t, s.Refill(math.MaxInt64))
		require.False(t, s.TryRelease(1))
		require.Equal(t, atomicsem.Stats{Available: top, Limit: top, Max: top}, s.Stats())

		// Requests.
		_, err := s.Acquire(context.Background(), top+1)
		require.ErrorIs(t, err, atomicsem.ErrInvalidPermits)
		_, ok := s.TryAcquire(top + 1)
		require.False(t, ok)
		one, err := s.Acquire(context.Background(), 1)
		require.NoError(t, err)
		_, ok = s.TryAcquire(top)
		require.False(t, ok, "only MaxPermits − 1 are free")
		rest, ok := s.TryAcquire(top - 1)
		require.True(t, ok)
		require.Equal(t, atomicsem.Stats{Available: 0, Held: top, Limit: top, Max: top}, s.Stats())

		// Limits, with everything held: the deepest debt, and back.
		require.ErrorIs(t, s.SetLimit(top+1), atomicsem.ErrExceedsMax)
		require.NoError(t, s.SetLimit(top-1))
		require.Equal(t, atomicsem.Stats{Available: -1, Held: top, Limit: top - 1, Max: top}, s.Stats())
		require.NoError(t, s.SetLimit(0))
		require.Equal(t, atomicsem.Stats{Available: -top, Held: top, Limit: 0, Max: top}, s.Stats())
		require.NoError(t, s.SetLimit(top))
		require.Equal(t, atomicsem.Stats{Available: 0, Held: top, Limit: top, Max: top}, s.Stats())

		// Returning and forgetting the widest tokens.
		rest.Forget()
		require.Equal(t, atomicsem.Stats{Available: 0, Held: 1, Limit: 1, Max: top}, s.Stats())
		one.Release()
		require.Equal(t, atomicsem.Stats{Available: 1, Held: 0, Limit: 1, Max: top}, s.Stats())
		require.Equal(t, int64(top-1), s.Refill(math.MaxInt64))
		all, err := s.Acquire(context.Background(), top)
		require.NoError(t, err)
		all.Release()
		require.Equal(t, atomicsem.Stats{Available: top, Limit: top, Max: top}, s.Stats())
	})
}

// A semaphore whose maximum is below MaxPermits refuses what is above its
// maximum, at the edge, with ErrExceedsMax.
func TestBoundariesAtASmallerMaximum(t *testing.T) {
	const max = atomicsem.MaxPermits - 1
	s := mustNew(t, max, max)
	_, err := s.Acquire(context.Background(), max+1)
	require.ErrorIs(t, err, atomicsem.ErrExceedsMax)
	_, ok := s.TryAcquire(max + 1)
	require.False(t, ok)
	require.ErrorIs(t, s.SetLimit(max+1), atomicsem.ErrExceedsMax)
	require.False(t, s.TryRelease(1))
	require.Zero(t, s.Refill(1))
	tok, err := s.Acquire(context.Background(), max)
	require.NoError(t, err)
	tok.Release()
	require.Equal(t, atomicsem.Stats{Available: max, Limit: max, Max: max}, s.Stats())
}

func TestSetLimitBelowHeldThenRaise(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := mustNew(t, 4, 8, opts...)
			a, b := mustTake(t, s, 2), mustTake(t, s, 1)

			// Throttle below what is held: no token is revoked, the
			// difference shows as debt.
			require.NoError(t, s.SetLimit(1))
			require.Equal(t, atomicsem.Stats{Available: -2, Held: 3, Limit: 1, Max: 8}, s.Stats())
			_, ok := s.TryAcquire(1)
			require.False(t, ok, "no permit may be taken while in debt")
			waiter := park(t, s, t.Context(), 1) // Acquire waits while in debt

			a.Release()
			synctest.Wait()
			require.Equal(t, atomicsem.Stats{Available: 0, Held: 1, Limit: 1, Max: 8, Waiters: 1}, s.Stats())
			require.False(t, waiter.returned(), "paying the debt off leaves nothing to grant")

			// Unthrottle: the waiter is served by SetLimit itself.
			require.NoError(t, s.SetLimit(6))
			synctest.Wait()
			requireGranted(t, waiter, 1, "raising the limit must wake the waiter")
			require.Equal(t, atomicsem.Stats{Available: 4, Held: 2, Limit: 6, Max: 8}, s.Stats())

			waiter.tok.Release()
			b.Release()
			require.Equal(t, atomicsem.Stats{Available: 6, Held: 0, Limit: 6, Max: 8}, s.Stats())
		})
	})
}

func TestTryReleaseCountsHeldPermitsAgainstMax(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := mustNew(t, 5, 5, opts...)
		held := mustTake(t, s, 3)
		before := s.Stats()
		require.False(t, s.TryRelease(1), "limit is at max with 3 permits out: no room for more")
		require.Equal(t, before, s.Stats())
		held.Release()
		require.False(t, s.TryRelease(1), "releasing a token must not make room above max")

		require.NoError(t, s.SetLimit(2))
		held = mustTake(t, s, 2)
		require.True(t, s.TryRelease(3))
		require.Equal(t, atomicsem.Stats{Available: 3, Held: 2, Limit: 5, Max: 5}, s.Stats())
		require.False(t, s.TryRelease(1))
		held.Release()
		require.Equal(t, atomicsem.Stats{Available: 5, Held: 0, Limit: 5, Max: 5}, s.Stats())
	})
}

func TestForgetLowersLimit(t *testing.T) {
	tests := []struct {
		name   string
		holds  []int64           // tokens taken from New(5, 5)
		limit  int64             // then the limit is set to this
		forget []int             // then these tokens are forgotten, in order
		after  []atomicsem.Stats // Stats after each Forget
	}{
		{"one of two", []int64{2, 1}, 5, []int{0},
			[]atomicsem.Stats{{Available: 2, Held: 1, Limit: 3, Max: 5}}},
		{"all", []int64{2, 3}, 5, []int{1, 0},
			[]atomicsem.Stats{{Available: 0, Held: 2, Limit: 2, Max: 5}, {Available: 0, Held: 0, Limit: 0, Max: 5}}},
		{"in debt after SetLimit(0)", []int64{4}, 0, []int{0},
			[]atomicsem.Stats{{Available: 0, Held: 0, Limit: 0, Max: 5}}},
		{"in debt, limit stops at zero", []int64{2, 2}, 3, []int{0, 1},
			[]atomicsem.Stats{{Available: -1, Held: 2, Limit: 1, Max: 5}, {Available: 0, Held: 0, Limit: 0, Max: 5}}},
	}
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := mustNew(t, 5, 5, opts...)
				var toks []*token.Token
				for _, n := range tt.holds {
					toks = append(toks, mustTake(t, s, n))
				}
				require.NoError(t, s.SetLimit(tt.limit))
				for i, idx := range tt.forget {
					toks[idx].Forget()
					require.Equal(t, tt.after[i], s.Stats(), "after forgetting token %d", idx)
				}
				for _, tok := range toks {
					if tok.Permits() > 0 {
						tok.Release()
					}
				}
				// Releases leave the lowered limit where the last Forget put it.
				limit := tt.after[len(tt.after)-1].Limit
				require.Equal(t, atomicsem.Stats{Available: limit, Limit: limit, Max: 5}, s.Stats())
				// The forgotten permits can be put back, up to max.
				if limit < 5 {
					require.True(t, s.TryRelease(5-limit))
				}
				require.Equal(t, atomicsem.Stats{Available: 5, Held: 0, Limit: 5, Max: 5}, s.Stats())
			})
		}
	})
}

// Refill adds what fits under the maximum, counting what tokens hold, and
// nothing for n ≤ 0 or after Close. It is the burst-credit top-up that
// TryRelease cannot be: after spending 5 of 100, a TryRelease(10) per tick
// stays at 95 for ever, a Refill(10) returns to 100.
func TestRefillTopsUpToTheMaximum(t *testing.T) {
	s := mustNew(t, 100, 100)
	spent := mustTake(t, s, 5)
	spent.Forget()
	require.False(t, s.TryRelease(10))
	require.Equal(t, int64(5), s.Refill(10))
	require.Equal(t, atomicsem.Stats{Available: 100, Limit: 100, Max: 100}, s.Stats())

	held := mustTake(t, s, 30)
	require.NoError(t, s.SetLimit(40))
	require.Equal(t, int64(60), s.Refill(1000), "held permits count against the maximum")
	require.Equal(t, atomicsem.Stats{Available: 70, Held: 30, Limit: 100, Max: 100}, s.Stats())
	held.Release()

	for _, n := range []int64{0, -1, math.MinInt64} {
		require.NoError(t, s.SetLimit(50))
		require.Zero(t, s.Refill(n), "Refill(%d)", n)
		require.Equal(t, atomicsem.Stats{Available: 50, Limit: 50, Max: 100}, s.Stats())
	}
	s.Close()
	require.Zero(t, s.Refill(10), "a closed semaphore takes no new permits")
	require.Equal(t, atomicsem.Stats{Available: 50, Limit: 50, Max: 100, Closed: true}, s.Stats())
}

// A Refill that admits parked waiters serves them in order, in both modes.
func TestRefillWakesTheWaitersThatNowFit(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := mustNew(t, 0, 10, opts...)
			first := park(t, s, t.Context(), 3)
			second := park(t, s, t.Context(), 4)
			require.Equal(t, int64(5), s.Refill(5))
			synctest.Wait()
			requireGranted(t, first, 3)
			require.False(t, second.returned(), "4 do not fit in the 2 left")
			require.Equal(t, int64(5), s.Refill(100))
			synctest.Wait()
			requireGranted(t, second, 4)
			first.tok.Release()
			second.tok.Release()
			require.Equal(t, atomicsem.Stats{Available: 10, Limit: 10, Max: 10}, s.Stats())
		})
	})
}

// Refill, like TryRelease, is one CAS on the word while no waiter is
// queued: it never waits for the queue lock.
func TestRefillWithNobodyQueuedTakesNoLock(t *testing.T) {
	s := mustNew(t, 0, 10)
	unlock := atomicsem.LockQueue(s)
	defer unlock()
	require.Equal(t, int64(10), s.Refill(10))
	require.NoError(t, s.SetLimit(5))
	require.True(t, s.TryRelease(1))
}
