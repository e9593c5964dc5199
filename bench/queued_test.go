package bench_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// TestRunQueuedParksEveryAcquire checks what BenchmarkContended claims of
// its harness: with runQueued, a FIFO semaphore's acquires park, rather
// than find a permit free, at both limits. Each acquire first tries to take
// a permit without waiting and counts the times it could.
func TestRunQueuedParksEveryAcquire(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a benchmark per case")
	}
	for _, limit := range []int64{1, 4} {
		for _, im := range pick("atomicsem", "chan", "floorpark") {
			t.Run(fmt.Sprintf("impl=%s/limit=%d", im.name, limit), func(t *testing.T) {
				var ops, free atomic.Int64
				testing.Benchmark(func(b *testing.B) {
					s := im.new(limit, limit)
					ops.Store(int64(b.N))
					free.Store(0)
					runQueued(b, s, limit, func(ctx context.Context, n int64, h *held) error {
						if s.tryAcquire(n, h) {
							free.Add(1)
							return nil
						}
						return s.acquire(ctx, n, h)
					})
				})
				// A few acquires may find a permit free: a goroutine can be
				// preempted between its release and its next acquire.
				if share := float64(free.Load()) / float64(ops.Load()); share > 0.01 {
					t.Errorf("%d of %d acquires found a permit free (%.1f %%), want none but a few",
						free.Load(), ops.Load(), 100*share)
				}
				t.Logf("%d of %d acquires found a permit free", free.Load(), ops.Load())
			})
		}
	}
}
