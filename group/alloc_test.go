package group_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/group"
)

// skipUnderRace skips an allocation test in a -race build, where sync.Pool
// drops a share of what is put in it on purpose and the counts mean nothing.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
}

// TestGoAllocatesNothing checks that Go, TryGo and Wait allocate nothing
// once the group has run a function: the record a function runs with is
// recycled, with the closure its goroutine starts from.
func TestGoAllocatesNothing(t *testing.T) {
	skipUnderRace(t)
	g := group.New(newSem(t, 4, 4))
	nop := func() error { return nil }
	allocs := testing.AllocsPerRun(1000, func() {
		_ = g.Go(background, 1, nop)
		g.TryGo(1, nop)
		_ = g.Wait()
	})
	require.Zero(t, allocs)
}

// TestMapAllocationsDoNotGrowWithTheInput checks that Map allocates the
// same few objects (the results, its own state, the contexts and a record
// per goroutine it starts) for 100 elements as for 100 000: nothing per
// element.
func TestMapAllocationsDoNotGrowWithTheInput(t *testing.T) {
	skipUnderRace(t)
	sem := newSem(t, 4, 4)
	double := func(_ context.Context, x int) (int, error) { return 2 * x, nil }
	allocsFor := func(n int) float64 {
		in := make([]int, n)
		return testing.AllocsPerRun(20, func() {
			_, _ = group.Map(background, sem, in, double)
		})
	}
	small, large := allocsFor(100), allocsFor(100_000)
	require.Less(t, large, 64.0, "allocations for 100 000 elements")
	require.Less(t, large-small, 32.0, "allocations that grow with the input: %v for 100, %v for 100 000", small, large)
}
