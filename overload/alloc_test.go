package overload_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/overload"
)

// TestAdmissionDoesNotAllocate checks the operations that never wait, for
// every number of classes: a token is a value and the decision one CAS, so
// admitting and releasing must not touch the heap.
func TestAdmissionDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's token tracking allocates")
	}
	ctx := context.Background()
	for k := 1; k <= overload.MaxClasses; k++ {
		cl := classes(make([]float64, k)...)
		cl[0].Share, cl[k-1].MaxShare = 0.25, 0.5
		g := overload.MustNew(4, 4, cl)
		for c := range k {
			t.Run(fmt.Sprintf("k=%d/class=%d", k, c), func(t *testing.T) {
				allocs := testing.AllocsPerRun(200, func() {
					tok, err := g.Acquire(ctx, c, 1)
					if err != nil {
						t.Fatal(err)
					}
					tok.Release()
					tok, ok := g.TryAcquire(c, 1)
					if !ok {
						t.Fatal("TryAcquire failed on a free gate")
					}
					tok.Release()
				})
				require.Zero(t, allocs)
			})
		}
		require.Zero(t, testing.AllocsPerRun(100, func() { _ = g.SetLimit(3) }), "SetLimit")
	}
}
