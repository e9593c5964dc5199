package atomicsem_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
)

// TestNilArgumentsPanicWithThePackagePrefix calls every exported entry
// point of the package that takes a pointer or an interface with nil (a
// nil receiver, a nil context, a nil option), and requires a panic in the
// package's voice that names what was nil, raised before anything changes.
func TestNilArgumentsPanicWithThePackagePrefix(t *testing.T) {
	var nilSem *atomicsem.Semaphore
	live := atomicsem.MustNew(1, 2)
	var nilCtx context.Context //nolint:staticcheck // the nil under test
	tests := []struct {
		name string
		call func()
		want string
	}{
		{"New(nil Option)", func() { _, _ = atomicsem.New(1, 1, nil) }, "nil Option"},
		{"MustNew(nil Option)", func() { atomicsem.MustNew(1, 1, atomicsem.WithBarging(), nil) }, "nil Option"},
		{"nil.Acquire", func() { _, _ = nilSem.Acquire(context.Background(), 1) }, "Acquire called on a nil *Semaphore"},
		{"Acquire(nil ctx)", func() { _, _ = live.Acquire(nilCtx, 1) }, "Acquire called with a nil Context"},
		{"Acquire(nil ctx, 0)", func() { _, _ = live.Acquire(nilCtx, 0) }, "Acquire called with a nil Context"},
		{"nil.TryAcquire", func() { _, _ = nilSem.TryAcquire(1) }, "TryAcquire called on a nil *Semaphore"},
		{"nil.TryRelease", func() { nilSem.TryRelease(1) }, "TryRelease called on a nil *Semaphore"},
		{"nil.Refill", func() { nilSem.Refill(1) }, "Refill called on a nil *Semaphore"},
		{"nil.SetLimit", func() { _ = nilSem.SetLimit(1) }, "SetLimit called on a nil *Semaphore"},
		{"nil.TryForget", func() { _, _ = nilSem.TryForget(1) }, "TryForget called on a nil *Semaphore"},
		{"nil.Close", func() { nilSem.Close() }, "Close called on a nil *Semaphore"},
		{"nil.Stats", func() { _ = nilSem.Stats() }, "Stats called on a nil *Semaphore"},
		{"nil.Held", func() { _ = nilSem.Held() }, "Held called on a nil *Semaphore"},
		{"nil.WaitIdle", func() { _ = nilSem.WaitIdle(context.Background()) }, "WaitIdle called on a nil *Semaphore"},
		{"WaitIdle(nil ctx)", func() { _ = live.WaitIdle(nilCtx) }, "WaitIdle called with a nil Context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := panicOf(tt.call)
			require.True(t, strings.HasPrefix(msg, "atomicsem: "), "got %q", msg)
			require.Contains(t, msg, tt.want)
			require.Equal(t, atomicsem.Stats{Available: 1, Limit: 1, Max: 2}, live.Stats(), "a refused call changed the semaphore")
		})
	}
}
