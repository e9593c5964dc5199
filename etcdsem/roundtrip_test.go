package etcdsem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/token"
)

// Each call's round trips, counted by a client interceptor, on a
// semaphore nobody else uses: an Acquire or TryAcquire where no key is
// held or waits takes one (the key is written held), and beside a holder
// two (write the key and read the semaphore, then grant), and opens no
// watch; a Release takes one; TryForget two (read, then grant); and every
// config change one while the handle's view of the config is current.
func TestUncontendedCallsTakeFewRoundTrips(t *testing.T) {
	srv := startServer(t)
	h := newHandle(t, srv, prefixFor(t), 4, 8, handleOpts{})
	ctx := testCtx(t)
	var tok, other token.Token
	tests := []struct {
		name string
		want int64
		call func()
	}{
		{"Acquire", 1, func() {
			var err error
			tok, err = h.Acquire(ctx, 2)
			require.NoError(t, err)
		}},
		{"Release", 1, func() { tok.Release() }},
		{"TryAcquire", 1, func() {
			var ok bool
			var err error
			other, ok, err = h.TryAcquire(ctx, 3)
			require.True(t, ok)
			require.NoError(t, err)
		}},
		{"Acquire beside a holder", 2, func() {
			var err error
			tok, err = h.Acquire(ctx, 1)
			require.NoError(t, err)
		}},
		{"Release beside a holder", 1, func() { tok.Release() }},
		{"TryAcquire and Release beside a holder", 3, func() {
			tok, ok, err := h.TryAcquire(ctx, 1)
			require.True(t, ok)
			require.NoError(t, err)
			tok.Release()
		}},
		{"Split", 0, func() {
			var ok bool
			tok, ok = other.Split(1)
			require.True(t, ok)
		}},
		{"Release of a part", 1, func() { tok.Release() }},
		{"Forget", 1, func() { other.Forget() }},
		{"TryRelease", 1, func() {
			ok, err := h.TryRelease(ctx, 2)
			require.True(t, ok)
			require.NoError(t, err)
		}},
		{"TryRelease refused", 1, func() {
			ok, err := h.TryRelease(ctx, 8)
			require.False(t, ok)
			require.NoError(t, err)
		}},
		{"Refill", 1, func() {
			added, err := h.Refill(ctx, 8)
			require.Equal(t, int64(4), added)
			require.NoError(t, err)
		}},
		{"SetLimit", 1, func() { require.NoError(t, h.SetLimit(ctx, 6)) }},
		{"TryForget", 2, func() {
			limit, ok, err := h.TryForget(ctx, 1)
			require.True(t, ok)
			require.NoError(t, err)
			require.Equal(t, int64(5), limit)
		}},
		{"Stats", 1, func() {
			st, err := h.Stats(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(5), st.Available)
		}},
		{"WaitIdle with nothing held", 1, func() { require.NoError(t, h.WaitIdle(ctx)) }},
		{"Acquire of nothing", 1, func() {
			tok, err := h.Acquire(ctx, 0)
			require.NoError(t, err)
			tok.Release()
		}},
		{"Close", 1, func() { require.NoError(t, h.Close(ctx)) }},
	}
	for _, tt := range tests {
		calls, streams := h.rpcs.calls.Load(), h.rpcs.streams.Load()
		tt.call()
		require.Equal(t, tt.want, h.rpcs.calls.Load()-calls, "%s: round trips", tt.name)
		require.Zero(t, h.rpcs.streams.Load()-streams, "%s: streams opened", tt.name)
	}
}
