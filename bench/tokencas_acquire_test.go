package bench_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// tokencas and wordcas stand for the least a semaphore with atomicsem's
// Acquire can cost, so their acquire must keep the part of its contract
// that costs something: a done context fails even with permits free, and
// the permits are counted.
func TestCASFloorsAcquireChecksTheContextFirst(t *testing.T) {
	for _, im := range pick("tokencas", "wordcas") {
		t.Run(im.name, func(t *testing.T) {
			s := im.new(2, 2)
			done, cancel := context.WithCancel(context.Background())
			cancel()
			require.ErrorIs(t, s.acquire(done, 1, new(held)), context.Canceled)

			// Both permits are still free: the refused acquire took none.
			ctx := context.Background()
			a, b := new(held), new(held)
			require.NoError(t, s.acquire(ctx, 1, a))
			require.NoError(t, s.acquire(ctx, 1, b))
			require.ErrorIs(t, s.acquire(ctx, 1, new(held)), errWouldWait, "acquire beyond the limit")
			s.release(a)
			require.NoError(t, s.acquire(ctx, 1, a), "acquire after a release")
			s.release(a)
			s.release(b)
		})
	}
}
