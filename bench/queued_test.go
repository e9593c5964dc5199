package bench_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// TestRunQueuedParksEveryAcquire checks what BenchmarkContended and
// BenchmarkWeighted claim of their harness: with runQueued, a FIFO
// semaphore's acquires park, rather than find permits free, in each of their
// shapes. Each acquire first tries to take its permits without waiting and
// counts the times it could.
func TestRunQueuedParksEveryAcquire(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a benchmark per case")
	}
	if raceBuild {
		// The race detector slows each goroutine's own code between its
		// operations enough that a queue of 16 sometimes drains. The regime
		// checked here is that of benchmark runs, which never use -race.
		t.Skip("checks the regime of benchmark runs, which are built without -race")
	}
	for _, c := range []struct {
		name  string
		shape queued
		impls []string
	}{
		// A buffered channel is FIFO for single permits only.
		{"contended/limit=1", queued{limit: 1, perP: 64, maxWeight: 1}, []string{"atomicsem", "chan", "floorpark", "floorparkword"}},
		{"contended/limit=4", queued{limit: 4, perP: 64, maxWeight: 1}, []string{"atomicsem", "chan", "floorpark", "floorparkword"}},
		{"weighted/limit=16", queued{limit: 16, perP: 8, maxWeight: 8}, []string{"atomicsem", "xsyncsem", "floorpark"}},
	} {
		for _, im := range pick(c.impls...) {
			t.Run(fmt.Sprintf("%s/impl=%s", c.name, im.name), func(t *testing.T) {
				var ops, free atomic.Int64
				testing.Benchmark(func(b *testing.B) {
					s := im.new(c.shape.limit, c.shape.limit)
					ops.Store(int64(b.N))
					free.Store(0)
					runQueued(b, s, c.shape, func(ctx context.Context, n int64, h *held) error {
						if s.tryAcquire(n, h) {
							free.Add(1)
							return nil
						}
						return s.acquire(ctx, n, h)
					})
				})
				// A few acquires may find permits free: a goroutine can be
				// preempted between its release and its next acquire.
				if share := float64(free.Load()) / float64(ops.Load()); share > 0.01 {
					t.Errorf("%d of %d acquires found permits free (%.1f %%), want none but a few",
						free.Load(), ops.Load(), 100*share)
				}
				t.Logf("%d of %d acquires found permits free", free.Load(), ops.Load())
			})
		}
	}
}
