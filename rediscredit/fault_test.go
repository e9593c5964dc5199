package rediscredit_test

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/rediscredit"
)

// A server killed while clients spend: every call fails with
// ErrUnavailable within its context's deadline, none hangs, and after a
// restart on the same port the buckets work again, full (the server lost
// them: the generous side).
func TestKilledServer(t *testing.T) {
	shared := needServer(t)
	srv, err := startServer(shared.bin, 0)
	require.NoError(t, err)
	defer srv.stop()
	c := client(t, srv.addr())
	closed, err := rediscredit.New(c, 1000, 10)
	require.NoError(t, err)
	open, err := rediscredit.New(c, 1, 10, rediscredit.WithFallback(0.5))
	require.NoError(t, err)
	k := key(t)

	const deadline = 2 * time.Second
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	unavailable, slow := 0, time.Duration(0)
	var other []error
	for g := range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				start := time.Now()
				var err error
				if g%2 == 0 {
					_, err = closed.TrySpend(ctx, k, 1)
				} else {
					_, err = closed.Spend(ctx, k, 1)
				}
				took := time.Since(start)
				cancel()
				mu.Lock()
				slow = max(slow, took)
				switch {
				case errors.Is(err, rediscredit.ErrUnavailable):
					unavailable++
				case err != nil:
					other = append(other, err)
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	srv.kill()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	require.Empty(t, other, "errors other than ErrUnavailable")
	require.Positive(t, unavailable, "no call saw the server gone")
	require.Less(t, slow, deadline, "a call outlived its context's deadline")

	// Fail-open decides locally, at half the burst; fail-closed refuses.
	ctx := context.Background()
	res, err := open.TrySpend(ctx, k, 5)
	require.NoError(t, err)
	require.True(t, res.OK)
	require.True(t, res.Local)
	res, err = open.TrySpend(ctx, k, 1)
	require.NoError(t, err)
	require.False(t, res.OK, "the fallback's burst is half the burst")
	r, res, err := open.TryReserve(ctx, k+":r", 2)
	require.NoError(t, err)
	require.True(t, res.Local)
	_, err = r.Settle(ctx, 1)
	require.NoError(t, err)
	_, err = closed.Stats(ctx, k)
	require.ErrorIs(t, err, rediscredit.ErrUnavailable)

	restarted, err := startServer(srv.bin, srv.port)
	require.NoError(t, err)
	defer restarted.stop()
	res, err = closed.Stats(ctx, k)
	require.NoError(t, err)
	require.Equal(t, int64(10), res.Balance, "a bucket the server lost comes back full")
	res, err = open.TrySpend(ctx, k, 10)
	require.NoError(t, err)
	require.True(t, res.OK)
	require.False(t, res.Local, "Redis answers again")
}

// A server that stops answering (SIGSTOP) does not hang a call past its
// context's deadline.
func TestHungServerRespectsTheDeadline(t *testing.T) {
	shared := needServer(t)
	srv, err := startServer(shared.bin, 0)
	require.NoError(t, err)
	defer srv.stop()
	c := client(t, srv.addr())
	l, err := rediscredit.New(c, 1000, 10)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = l.TrySpend(ctx, key(t), 1)
	require.NoError(t, err)

	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGSTOP))
	defer func() { _ = srv.cmd.Process.Signal(syscall.SIGCONT) }()
	for _, call := range []func(context.Context) error{
		func(ctx context.Context) error { _, err := l.TrySpend(ctx, key(t), 1); return err },
		func(ctx context.Context) error { _, err := l.Spend(ctx, key(t), 1); return err },
	} {
		ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		err := call(ctx)
		took := time.Since(start)
		cancel()
		require.Error(t, err)
		require.Less(t, took, time.Second, "a call hung past its deadline")
	}
	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGCONT))
	_, err = l.TrySpend(ctx, key(t), 1)
	require.NoError(t, err)
}
