package bench_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sync/semaphore"

	"github.com/atomicsem/atomicsem/atomicsem"
)

// parkedForMemory is how many waiters BenchmarkParkedMemory parks at once.
const parkedForMemory = 10_000

// BenchmarkParkedMemory measures what a parked acquirer costs in memory.
// Each iteration parks parkedForMemory goroutines on a plain channel receive
// and measures heap plus stack growth; then parks as many on an acquire of a
// semaphore whose only permit is held, and measures again. All acquirers use
// context.Background, so each parked goroutine waits on exactly one channel
// in both phases.
//
// B/waiter-raw is the second figure per waiter: goroutine, stack and
// semaphore bookkeeping together. B/waiter-net subtracts the first, leaving
// what the semaphore adds beyond a goroutine blocked on a channel.
// B/semaphore is unsafe.Sizeof of the semaphore's own struct, where the
// implementation has one the benchmark can name.
func BenchmarkParkedMemory(b *testing.B) {
	for _, im := range pick(parkers...) {
		b.Run("impl="+im.name, func(b *testing.B) {
			var raw, base float64
			for i := 0; i < b.N; i++ {
				base += parkedBytes(b, nil)
				raw += parkedBytes(b, im.new(1, 1))
			}
			raw, base = raw/float64(b.N), base/float64(b.N)
			b.ReportMetric(raw, "B/waiter-raw")
			b.ReportMetric(raw-base, "B/waiter-net")
			if size, ok := structSize[im.name]; ok {
				b.ReportMetric(float64(size), "B/semaphore")
			}
		})
	}
}

// structSize is the size of the struct behind each implementation, where
// there is one to name.
var structSize = map[string]uintptr{
	"atomicsem":         unsafe.Sizeof(atomicsem.Semaphore{}),
	"atomicsem-barging": unsafe.Sizeof(atomicsem.Semaphore{}),
	"xsync":             unsafe.Sizeof(semaphore.Weighted{}),
	"mutex":             unsafe.Sizeof(condSem{}),
}

// parkedBytes parks parkedForMemory goroutines, on s if it is not nil and on
// a channel receive otherwise, and returns the growth of heap and stack in
// use per goroutine, measured after a full collection with all of them
// parked.
func parkedBytes(b *testing.B, s sem) float64 {
	var (
		wg      sync.WaitGroup
		started atomic.Int64
		gate    = make(chan struct{})
		ctx     = context.Background()
		holder  = new(held)
	)
	if s != nil && !s.tryAcquire(1, holder) {
		b.Fatal("could not take the only permit")
	}
	before := inUse()
	for range parkedForMemory {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Add(1)
			if s == nil {
				<-gate
				return
			}
			h := new(held)
			if err := s.acquire(ctx, 1, h); err != nil {
				panic(err)
			}
			// Pass the permit on, so that one release at the end wakes
			// everyone in turn.
			s.release(h)
		}()
	}
	for started.Load() < parkedForMemory {
		runtime.Gosched()
	}
	waitParked(b, s, parkedForMemory)
	after := inUse()
	if s == nil {
		close(gate)
	} else {
		s.release(holder)
	}
	wg.Wait()
	return float64(after-before) / parkedForMemory
}

// inUse returns the bytes of heap objects and goroutine stacks in use,
// after two collections so that pooled objects from earlier runs are gone.
func inUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc) + int64(ms.StackInuse)
}
