package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// parkOne starts an acquire of n permits on s and waits until it is queued
// behind the queued ones, so that arrival order is exactly the call order.
// The acquire's result arrives on the returned channel.
func parkOne(t *testing.T, s sem, wc waiterCounter, ctx context.Context, n int64, h *held) <-chan error {
	t.Helper()
	before := wc.waiters()
	errc := make(chan error, 1)
	go func() { errc <- s.acquire(ctx, n, h) }()
	require.Eventually(t, func() bool { return wc.waiters() == before+1 },
		5*time.Second, 50*time.Microsecond, "the acquire did not queue")
	return errc
}

// awaitGrant waits for an acquire's result on errc and fails the test,
// naming the acquire as what, if it is an error or does not come within
// five seconds.
func awaitGrant(t *testing.T, errc <-chan error, what string) {
	t.Helper()
	select {
	case err := <-errc:
		require.NoError(t, err, what)
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not granted within 5 s", what)
	}
}

// requireFree checks that exactly free permits are available and nobody
// waits, and leaves them available.
func requireFree(t *testing.T, s sem, wc waiterCounter, free int64) {
	t.Helper()
	require.Zero(t, wc.waiters(), "waiters left queued")
	all, more := new(held), new(held)
	require.True(t, s.tryAcquire(free, all), "%d permits are not all free", free)
	require.False(t, s.tryAcquire(1, more), "more than %d permits free", free)
	s.release(all)
}
