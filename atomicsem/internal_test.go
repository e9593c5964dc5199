package atomicsem

// White-box tests: layout facts that comments in the package rely on, and
// paths that no public call reaches.

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// A parked Acquire costs its waiter record plus its event's channel, so the
// record is kept to the allocator's 48-byte size class on 64-bit platforms
// (see the waiter type). A field added carelessly, or a wider arrival time,
// would push it into the 64-byte class.
func TestWaiterRecordFitsFortyEightBytes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the size class is stated for 64-bit platforms")
	}
	require.LessOrEqual(t, unsafe.Sizeof(waiter{}), uintptr(48))
}

// The fast path reads block beside the state word. The word's cache line
// moves between cores under contention; with block on that line, every
// acquire would also wait for the line to read a field that never changes.
// block must start at least a 64-byte line's width after word, so that the
// two can never share one.
func TestBlockMaskIsOffTheStateWordsCacheLine(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is arranged for 64-bit platforms")
	}
	var s Semaphore
	require.GreaterOrEqual(t, unsafe.Offsetof(s.block)-unsafe.Offsetof(s.word), uintptr(64))
}

// The free list keeps at most maxFreeWaiters records on each of its stacks,
// so that a burst of parked goroutines does not pin its peak memory.
func TestFreeListKeepsAtMostMaxFreeWaiters(t *testing.T) {
	s, err := New(1, 1)
	require.NoError(t, err)
	var l waiterFreeList
	for range maxFreeWaiters + 10 {
		l.putLocked(&waiter{sem: s})
		l.putSpill(&waiter{sem: s})
	}
	require.Equal(t, maxFreeWaiters, l.len)
	require.Equal(t, int32(maxFreeWaiters), l.spillLen.Load())
	taken := 0
	for l.head != nil || l.spill.Load() != nil {
		l.getLocked(s, 1, false)
		taken++
	}
	require.Equal(t, 2*maxFreeWaiters, taken, "records recycled")
	require.Zero(t, l.len)
	require.Zero(t, l.spillLen.Load())
}

// A return of more permits than are held can only come from a token ended
// by two goroutines at once, so no public call makes one. It must panic and
// change nothing, and it must do so before the front hand-off in handOff,
// whose other conditions it can meet: here nothing is free, the front
// waiter asks for exactly what comes back (above the limit, which a waiter
// may), and the one behind it fits. Granted, the front waiter would hold 2
// permits that the word never counted.
func TestReturnBeyondHeldPanicsBeforeTheFrontHandOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(1, 3)
		require.NoError(t, err)
		holder, ok := s.TryAcquire(1)
		require.True(t, ok)

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errs := make(chan error, 2)
		for _, n := range []int64{2, 1} { // the front waiter, then the one behind
			go func() {
				_, err := s.Acquire(ctx, n)
				if err == nil {
					err = errors.New("granted") // not released: the count is wrong
				}
				errs <- err
			}()
			synctest.Wait() // parked, so that the two queue in this order
		}
		before := s.Stats()
		require.Equal(t, Stats{Available: 0, Held: 1, Limit: 1, Max: 3, Waiters: 2}, before)

		require.PanicsWithValue(t, errReturnExceedsHeld, func() { (*owner)(s).ReturnPermits(2, 0) })
		require.Equal(t, before, s.Stats())
		require.Empty(t, QueueFlagsError(s))

		cancel()
		for range 2 {
			require.ErrorIs(t, <-errs, context.Canceled)
		}
		holder.Release()
		require.Equal(t, Stats{Available: 1, Limit: 1, Max: 3}, s.Stats())
	})
}
