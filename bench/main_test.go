package bench_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain checks that no benchmark or test leaves a goroutine behind: a
// parked waiter left over from one benchmark would be measured by the next.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestHeldFillsOneSizeClass keeps held at the 128 bytes that its doc
// counts on to keep records of different goroutines off each other's cache
// lines.
func TestHeldFillsOneSizeClass(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the padding is computed for 64-bit platforms")
	}
	require.Equal(t, uintptr(128), unsafe.Sizeof(held{}))
}
