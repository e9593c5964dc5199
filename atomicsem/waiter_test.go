package atomicsem

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// A parked Acquire costs its waiter record plus its event's channel, so the
// record is kept to the allocator's 48-byte size class on 64-bit platforms
// (docs/benchmarks.md, Memory). A field added carelessly, or a wider arrival
// time, would push it into the 64-byte class.
func TestWaiterRecordFitsFortyEightBytes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the size class is stated for 64-bit platforms")
	}
	require.LessOrEqual(t, unsafe.Sizeof(waiter{}), uintptr(48))
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

// The fast path reads block beside the state word. With the two on one
// cache line, the line that moves between cores under contention is read
// twice per acquire, and Parallel cost 1.5× as much (docs/benchmarks.md,
// optimisation 10). block must start at least a 64-byte line's width after
// word, so that they can never share one.
func TestBlockMaskIsOffTheStateWordsCacheLine(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is arranged for 64-bit platforms")
	}
	var s Semaphore
	require.GreaterOrEqual(t, unsafe.Offsetof(s.block)-unsafe.Offsetof(s.word), uintptr(64))
}
