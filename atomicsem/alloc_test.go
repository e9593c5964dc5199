package atomicsem_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
)

// allocRuns is how many times each allocation check repeats its operation.
const allocRuns = 200

// TestFastPathsDoNotAllocate checks the operations that never wait: a token
// is a value, so taking and returning permits must not touch the heap.
func TestFastPathsDoNotAllocate(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		op   func(t *testing.T, s *atomicsem.Semaphore)
	}{
		{"Acquire+Release", func(t *testing.T, s *atomicsem.Semaphore) {
			tok, err := s.Acquire(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			tok.Release()
		}},
		{"TryAcquire+Release", func(t *testing.T, s *atomicsem.Semaphore) {
			tok, ok := s.TryAcquire(1)
			if !ok {
				t.Fatal("TryAcquire failed on a free semaphore")
			}
			tok.Release()
		}},
		{"Acquire+Forget+TryRelease", func(t *testing.T, s *atomicsem.Semaphore) {
			tok, err := s.Acquire(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			tok.Forget()
			if !s.TryRelease(1) {
				t.Fatal("TryRelease failed after Forget")
			}
		}},
		{"SetLimit", func(t *testing.T, s *atomicsem.Semaphore) {
			if err := s.SetLimit(1); err != nil {
				t.Fatal(err)
			}
		}},
	}
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				skipUnderRace(t)
				s := mustNew(t, 1, 1, opts...)
				allocs := testing.AllocsPerRun(allocRuns, func() { tt.op(t, s) })
				require.Zero(t, allocs, "allocations per %s", tt.name)
			})
		}
	})
}

// TestParkedAcquireDoesNotAllocate checks the slow path in steady state: an
// Acquire that parks until a release from another goroutine serves it reuses
// a waiter record and its channel, so that a semaphore under contention does
// not feed the garbage collector.
func TestParkedAcquireDoesNotAllocate(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		skipUnderRace(t)
		s := mustNew(t, 1, 1, opts...)
		slot := mustTake(t, s, 1)
		releaser := startHelper(t, func() {
			waitParked(s)
			slot.Release()
		})
		// A deadline, made before the measured runs, turns a lost wake-up
		// into a quick failure rather than a hung test.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		allocs := testing.AllocsPerRun(allocRuns, func() {
			releaser.kick()
			var err error
			// The release synchronizes before Acquire returns, so the
			// helper is done with slot when it is written here.
			*slot, err = s.Acquire(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
		})
		releaser.stop()
		slot.Release()
		require.Zero(t, allocs, "allocations per parked Acquire")
	})
}

// TestCancelledAcquireAllocatesNothingBeyondItsContext checks cancellation:
// an Acquire that parks and then gives up, because its context is cancelled,
// leaves nothing behind for the garbage collector. The contexts are made
// before the measured runs, so what is measured is the semaphore's share.
func TestCancelledAcquireAllocatesNothingBeyondItsContext(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		skipUnderRace(t)
		s := mustNew(t, 0, 1, opts...)
		// AllocsPerRun runs the function once more than asked, to warm up.
		ctxs := make([]context.Context, allocRuns+1)
		cancels := make([]context.CancelFunc, allocRuns+1)
		for i := range ctxs {
			ctxs[i], cancels[i] = context.WithCancel(context.Background())
			defer cancels[i]()
			// A context makes its Done channel on first request; make it
			// now, outside the measured runs.
			_ = ctxs[i].Done()
		}
		next := 0
		canceller := startHelper(t, func() {
			waitParked(s)
			cancels[next]()
		})
		allocs := testing.AllocsPerRun(allocRuns, func() {
			canceller.kick()
			_, err := s.Acquire(ctxs[next], 1)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Acquire returned %v, want context.Canceled", err)
			}
			next++
		})
		canceller.stop()
		require.Zero(t, allocs, "allocations per cancelled Acquire")
		require.Equal(t, atomicsem.Stats{Max: 1}, s.Stats())
	})
}

// helper runs f in its own goroutine once per kick, so that a measured
// function can have work done for it without starting a goroutine, which
// allocates.
type helper struct {
	kicks chan struct{}
	done  chan struct{}
}

func startHelper(t *testing.T, f func()) *helper {
	t.Helper()
	h := &helper{kicks: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for range h.kicks {
			f()
		}
	}()
	return h
}

// kick starts one run of f; it returns once the helper has received it.
func (h *helper) kick() { h.kicks <- struct{}{} }

// stop ends the helper and waits for it.
func (h *helper) stop() {
	close(h.kicks)
	<-h.done
}

// waitParked waits until an Acquire is parked on s.
func waitParked(s *atomicsem.Semaphore) {
	for s.Stats().Waiters == 0 {
		runtime.Gosched()
	}
}

// skipUnderRace skips an allocation check in a -race build, whose
// instrumentation allocates on its own.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if allocRaceBuild {
		t.Skip("allocation counts are not meaningful under -race")
	}
}
