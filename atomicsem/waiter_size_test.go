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
