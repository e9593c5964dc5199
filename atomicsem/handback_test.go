package atomicsem

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A return of more permits than are held can only come from a token ended
// by two goroutines at once, so no public call makes one. It must panic and
// change nothing, and it must do so before the front hand-off in handOff,
// whose other conditions it can meet: here nothing is free, the front
// waiter asks for exactly what comes back (above the limit, which a waiter
// may), and the one behind it fits. Granted, the front waiter would hold 2
// permits that the word never counted.
func TestReturnBeyondHeldPanicsBeforeTheFrontHandOff(t *testing.T) {
	s, err := New(1, 3)
	require.NoError(t, err)
	holder, ok := s.TryAcquire(1)
	require.True(t, ok)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 2)
	for i, n := range []int64{2, 1} { // the front waiter, then the one behind
		go func() {
			_, err := s.Acquire(ctx, n)
			if err == nil {
				err = errors.New("granted") // not released: the count is wrong
			}
			errs <- err
		}()
		require.Eventually(t, func() bool { return s.Stats().Waiters == i+1 },
			5*time.Second, 50*time.Microsecond, "waiter %d did not queue", i)
	}
	before := s.Stats()

	require.PanicsWithValue(t, errReturnExceedsHeld, func() { (*owner)(s).ReturnPermits(2, 0) })
	require.Equal(t, before, s.Stats())
	require.Empty(t, QueueFlagsError(s))

	cancel()
	for range 2 {
		require.ErrorIs(t, <-errs, context.Canceled)
	}
	holder.Release()
	require.Equal(t, Stats{Available: 1, Limit: 1, Max: 3}, s.Stats())
}
