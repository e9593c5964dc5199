package etcdsem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/etcdsem"
)

func TestSmoke(t *testing.T) {
	srv := startServer(t)
	a := newHandle(t, srv, prefixFor(t), 2, 4, handleOpts{})
	b := newHandle(t, srv, prefixFor(t), 0, 4, handleOpts{})
	ctx := testCtx(t)
	tok, err := a.Acquire(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, etcdsem.Stats{Available: 0, Held: 2, Limit: 2, Max: 4}, mustStats(t, b.Semaphore))
	done := make(chan struct{})
	go func() {
		defer close(done)
		tok2, err := b.Acquire(ctx, 1)
		require.NoError(t, err)
		tok2.Release()
	}()
	tok.Release()
	<-done
	require.Equal(t, etcdsem.Stats{Available: 2, Held: 0, Limit: 2, Max: 4}, mustStats(t, b.Semaphore))
}
