package event_test

// Helpers shared by the package's tests.

import (
	"context"
	"testing"

	"sync/atomic"
)

// waiter is what AutoReset and ManualReset have in common for a test that
// waits on either.
type waiter interface {
	Wait(ctx context.Context) error
}

// startWaiters starts n goroutines blocked in e.Wait and returns a counter
// of how many have returned nil. Wait errors fail the test.
func startWaiters(t *testing.T, e waiter, n int) *atomic.Int64 {
	t.Helper()
	woken := &atomic.Int64{}
	for range n {
		go func() {
			if err := e.Wait(context.Background()); err != nil {
				t.Errorf("Wait: %v", err)
				return
			}
			woken.Add(1)
		}()
	}
	return woken
}

// goWait starts e.Wait(ctx) in a goroutine and returns a channel that
// receives its result.
func goWait(ctx context.Context, e waiter) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- e.Wait(ctx) }()
	return errc
}

// isClosed reports whether c is closed, without blocking.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// skipUnderRace skips allocation tests in -race builds, where the race
// detector's own bookkeeping changes the counts.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
}
