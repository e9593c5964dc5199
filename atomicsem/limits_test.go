package atomicsem_test

import (
	"context"
	"math"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
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
		require.Equal(t, counts{Available: top, Limit: top}, countsOf(s))

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
		require.Equal(t, counts{Available: 0, Held: top, Limit: top}, countsOf(s))

		// Limits, with everything held: the deepest debt, and back.
		require.ErrorIs(t, s.SetLimit(top+1), atomicsem.ErrExceedsMax)
		require.NoError(t, s.SetLimit(top-1))
		require.Equal(t, counts{Available: -1, Held: top, Limit: top - 1}, countsOf(s))
		require.NoError(t, s.SetLimit(0))
		require.Equal(t, counts{Available: -top, Held: top, Limit: 0}, countsOf(s))
		require.NoError(t, s.SetLimit(top))
		require.Equal(t, counts{Available: 0, Held: top, Limit: top}, countsOf(s))

		// Returning and forgetting the widest tokens.
		rest.Forget()
		require.Equal(t, counts{Available: 0, Held: 1, Limit: 1}, countsOf(s))
		one.Release()
		require.Equal(t, counts{Available: 1, Held: 0, Limit: 1}, countsOf(s))
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
	require.Equal(t, counts{Available: 100, Limit: 100}, countsOf(s))

	held := mustTake(t, s, 30)
	require.NoError(t, s.SetLimit(40))
	require.Equal(t, int64(60), s.Refill(1000), "held permits count against the maximum")
	require.Equal(t, counts{Available: 70, Held: 30, Limit: 100}, countsOf(s))
	held.Release()

	for _, n := range []int64{0, -1, math.MinInt64} {
		require.NoError(t, s.SetLimit(50))
		require.Zero(t, s.Refill(n), "Refill(%d)", n)
		require.Equal(t, counts{Available: 50, Limit: 50}, countsOf(s))
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

// MustNew is New for package-level semaphores: it panics, prefixed, on
// arguments New refuses.
func TestMustNewPanicsOnWhatNewRefuses(t *testing.T) {
	s := atomicsem.MustNew(2, 4)
	require.Equal(t, atomicsem.Stats{Available: 2, Limit: 2, Max: 4}, s.Stats())
	for _, args := range [][2]int64{{-1, 1}, {5, 4}, {0, atomicsem.MaxPermits + 1}} {
		require.PanicsWithError(t,
			"atomicsem: invalid number of permits: New("+itoa(args[0])+", "+itoa(args[1])+") needs 0 ≤ initial ≤ max ≤ 1073741823",
			func() { atomicsem.MustNew(args[0], args[1]) })
	}
}

// A Semaphore not made by New is not a semaphore of maximum zero: every
// method panics with a message that says what went wrong, on the fast
// paths too, and nothing hangs.
func TestZeroSemaphorePanicsOnFirstUse(t *testing.T) {
	const msg = "atomicsem: Semaphore used without New (the zero value is not usable)"
	calls := map[string]func(s *atomicsem.Semaphore){
		"Acquire":    func(s *atomicsem.Semaphore) { _, _ = s.Acquire(context.Background(), 1) },
		"Acquire0":   func(s *atomicsem.Semaphore) { _, _ = s.Acquire(context.Background(), 0) },
		"TryAcquire": func(s *atomicsem.Semaphore) { _, _ = s.TryAcquire(1) },
		"TryRelease": func(s *atomicsem.Semaphore) { s.TryRelease(1) },
		"Refill":     func(s *atomicsem.Semaphore) { s.Refill(1) },
		"SetLimit":   func(s *atomicsem.Semaphore) { _ = s.SetLimit(0) },
		"Close":      func(s *atomicsem.Semaphore) { s.Close() },
		"Stats":      func(s *atomicsem.Semaphore) { s.Stats() },
		"WaitIdle":   func(s *atomicsem.Semaphore) { _ = s.WaitIdle(context.Background()) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			var s atomicsem.Semaphore
			require.PanicsWithValue(t, msg, func() { call(&s) })
		})
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
