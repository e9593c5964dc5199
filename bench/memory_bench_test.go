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
// Each iteration parks parkedForMemory goroutines on a plain channel
// receive and measures how much the heap and the goroutine stacks grew; then
// it parks as many on an acquire of a semaphore whose only permit is held,
// and measures again. All acquirers use context.Background, so each parked
// goroutine waits on exactly one channel in both phases.
//
// Metrics, per parked acquirer:
//   - B/waiter-raw: heap and stack growth together: the goroutine's stack,
//     the runtime's record of its wait, and the semaphore's bookkeeping;
//   - B/waiter-stack: the stack growth alone;
//   - B/waiter-net: heap growth minus the heap growth of a goroutine parked
//     on a channel: what the semaphore adds beyond a blocked goroutine.
//
// The runtime keeps the descriptors of exited goroutines for reuse, so after
// the warm-up phase neither phase pays for them: raw leaves out the
// goroutine descriptor itself (a few hundred bytes), in every column alike.
// B/semaphore is unsafe.Sizeof of the semaphore's own struct, where the
// implementation has one the benchmark can name.
func BenchmarkParkedMemory(b *testing.B) {
	for _, im := range pick(parkers...) {
		b.Run("impl="+im.name, func(b *testing.B) {
			parked(b, nil) // warm-up: the goroutine descriptors
			var acqHeap, acqStack, baseHeap float64
			for i := 0; i < b.N; i++ {
				h, _ := parked(b, nil)
				baseHeap += h
				h, st := parked(b, im.new(1, 1))
				acqHeap += h
				acqStack += st
			}
			n := float64(b.N)
			b.ReportMetric((acqHeap+acqStack)/n, "B/waiter-raw")
			b.ReportMetric(acqStack/n, "B/waiter-stack")
			b.ReportMetric((acqHeap-baseHeap)/n, "B/waiter-net")
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
	"xsyncsem":          unsafe.Sizeof(semaphore.Weighted{}),
	"mutex":             unsafe.Sizeof(condSem{}),
	"floorpark":         unsafe.Sizeof(floorParkSem{}),
}

// parked parks parkedForMemory goroutines, on s if it is not nil and on a
// channel receive otherwise, and returns the growth of the heap and of the
// goroutine stacks per goroutine, measured after full collections with all
// of them parked.
func parked(b *testing.B, s sem) (heap, stack float64) {
	var (
		wg      sync.WaitGroup
		started atomic.Int64
		gate    = make(chan struct{})
		ctx     = context.Background()
		holder  = new(held)
		// Made before the first measurement, so that the harness's own
		// records are in neither figure.
		records = make([]held, parkedForMemory)
	)
	if s != nil && !s.tryAcquire(1, holder) {
		b.Fatal("could not take the only permit")
	}
	heap0, stack0 := inUse()
	for i := range parkedForMemory {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Add(1)
			if s == nil {
				<-gate
				return
			}
			h := &records[i]
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
	heap1, stack1 := inUse()
	runtime.KeepAlive(records) // live at both measurements in both phases
	if s == nil {
		close(gate)
	} else {
		s.release(holder)
	}
	wg.Wait()
	return float64(heap1-heap0) / parkedForMemory, float64(stack1-stack0) / parkedForMemory
}

// inUse returns the bytes of heap objects and of goroutine stacks in use,
// after two collections, so that what earlier runs left in pools is gone.
func inUse() (heap, stack int64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc), int64(ms.StackInuse)
}
