package bench_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The columns, in the order benchstat shows them: the subject in both modes,
// then what a user would use instead, then the floors of each case
// (impls_test.go and tokencas_test.go say what each floor leaves out).
var (
	// everyone runs where nobody waits.
	everyone = []string{"atomicsem", "atomicsem-barging", "xsyncsem", "chan", "mutex",
		"floor", "floorcas", "tokencas", "wordcas"}
	// parkers runs where acquirers park.
	parkers = []string{"atomicsem", "atomicsem-barging", "xsyncsem", "chan", "mutex", "floorpark"}
)

// manyPermits is a limit far above the number of goroutines, so that no
// acquire ever waits.
const manyPermits = 1 << 16

// BenchmarkUncontended measures one goroutine taking and returning one permit
// of one: the cost of the fast paths with the state word in this core's cache.
func BenchmarkUncontended(b *testing.B) {
	for _, im := range pick(everyone...) {
		b.Run("impl="+im.name+"/op=acquire", func(b *testing.B) {
			serialAcquire(b, im)
		})
		b.Run("impl="+im.name+"/op=tryacquire", func(b *testing.B) {
			serialTryAcquire(b, im)
		})
	}
}

// serialAcquire is BenchmarkUncontended's Acquire+Release.
func serialAcquire(b *testing.B, im impl) {
	ctx, s, h := context.Background(), im.new(1, 1), new(held)
	b.ReportAllocs()
	defer measureCPU(b)()
	for i := 0; i < b.N; i++ {
		if err := s.acquire(ctx, 1, h); err != nil {
			b.Fatal(err)
		}
		s.release(h)
	}
}

// serialTryAcquire is BenchmarkUncontended's TryAcquire+Release.
func serialTryAcquire(b *testing.B, im impl) {
	s, h := im.new(1, 1), new(held)
	b.ReportAllocs()
	defer measureCPU(b)()
	for i := 0; i < b.N; i++ {
		if !s.tryAcquire(1, h) {
			b.Fatal("tryAcquire failed on a free semaphore")
		}
		s.release(h)
	}
}

// BenchmarkParallel measures GOMAXPROCS goroutines taking and returning one
// permit each from a limit far above their number: no acquire ever waits,
// so this is the fast path with the word's cache line moving between cores.
func BenchmarkParallel(b *testing.B) {
	for _, im := range pick(everyone...) {
		b.Run("impl="+im.name, func(b *testing.B) {
			s := im.new(manyPermits, manyPermits)
			b.ReportAllocs()
			defer measureCPU(b)()
			b.RunParallel(func(pb *testing.PB) {
				ctx, h := context.Background(), new(held)
				for pb.Next() {
					if err := s.acquire(ctx, 1, h); err != nil {
						panic(err)
					}
					s.release(h)
				}
			})
		})
	}
}

// gateLimit is the limit of BenchmarkGate: thousands of permits, as a
// server's limit on requests in flight has.
const gateLimit = 10_000

// BenchmarkGate measures the gate a server puts on every request: GOMAXPROCS
// goroutines take and return one permit of a limit of gateLimit, which no
// acquire waits for, as BenchmarkParallel does, beside a semaphore made
// WithPermitCache (atomicsem-cache) and the one-word floors. With one
// goroutine (-cpu 1) it is the cost of the cache's fast paths next to the
// word's; with many, that of a line per core against one line for all.
func BenchmarkGate(b *testing.B) {
	for _, im := range pick("atomicsem", "atomicsem-cache", "floorcas", "floor") {
		b.Run("impl="+im.name, func(b *testing.B) {
			s := im.new(gateLimit, gateLimit)
			b.ReportAllocs()
			defer measureCPU(b)()
			b.RunParallel(func(pb *testing.PB) {
				ctx, h := context.Background(), new(held)
				for pb.Next() {
					if err := s.acquire(ctx, 1, h); err != nil {
						panic(err)
					}
					s.release(h)
				}
			})
		})
	}
}

// BenchmarkContended measures hand-off: 64 goroutines per P take and return
// one permit of a limit of 1 or 4, with nothing done while holding it, and
// start parked (see runQueued), so that FIFO acquires park and releases wake
// someone on every operation. syncmutex, a bare sync.Mutex, is the reference
// for what barging buys with one permit; floorpark is the floor for FIFO
// hand-off to waiters parked each on a channel of its own, as atomicsem's
// are, and floorparkword that floor with the token's guard, the call a
// library's Acquire is, and arrivals and releases that pass the lock by on
// a state word while nobody is queued.
func BenchmarkContended(b *testing.B) {
	for _, limit := range []int64{1, 4} {
		names := append(parkers[:len(parkers):len(parkers)], "floorparkword")
		if limit == 1 {
			names = append(names[:len(names):len(names)], "syncmutex")
		}
		for _, im := range pick(names...) {
			b.Run(fmt.Sprintf("impl=%s/limit=%d", im.name, limit), func(b *testing.B) {
				s := im.new(limit, limit)
				b.ReportAllocs()
				runQueued(b, s, queued{limit: limit, perP: 64, maxWeight: 1}, s.acquire)
			})
		}
	}
}

// BenchmarkContendedYield is BenchmarkContended with holders that yield
// their P while they hold a permit (runtime.Gosched between acquire and
// release), as holders on a busy machine are descheduled. Arrivals then
// find the permits taken, spin in vain and park, and nearly every release
// meets parked waiters: the regime in which contention on many cores puts
// a barging semaphore, reached here on two. A barging release that takes
// the queue lock and wakes a waiter whenever waiters are parked then costs
// more than FIFO's hand-off (what cpu-ns/op and switches/op show).
func BenchmarkContendedYield(b *testing.B) {
	for _, limit := range []int64{1, 4} {
		names := []string{"atomicsem", "atomicsem-barging", "chan"}
		if limit == 1 {
			names = append(names, "syncmutex")
		}
		for _, im := range pick(names...) {
			b.Run(fmt.Sprintf("impl=%s/limit=%d", im.name, limit), func(b *testing.B) {
				s := im.new(limit, limit)
				b.ReportAllocs()
				runQueued(b, s, queued{limit: limit, perP: 64, maxWeight: 1, yield: true}, s.acquire)
			})
		}
	}
}

// queued is the shape of a runQueued run.
type queued struct {
	limit     int64 // the semaphore's limit
	perP      int   // goroutines per P
	maxWeight int64 // each goroutine asks for 1, 2, ... maxWeight permits in turn
	yield     bool  // each goroutine yields its P while it holds its permits
}

// runQueued runs b.N pairs of acquire (by calling acquire) and release on s
// from q.perP goroutines per P that start parked: it holds every permit
// while they arrive and returns them only once the timer runs, so that they
// form a queue from the first operation. Each goroutine cycles through
// requests of 1 to q.maxWeight permits, starting at a different point. It
// reports cpu-ns/op, and switches/op and lockwait-ns/op (see measureSched).
//
// b.RunParallel would start them with the permits free, and when the Ps'
// running goroutines can hold what they ask for all at once they never run
// out: a FIFO semaphore stays unparked until preemption happens to leave
// enough holders descheduled, then parks on every operation for the rest of
// the run, since a hand-off queue never drains. In Contended at a limit of
// 4 with two Ps that moment came after 200 000 to 750 000 operations, in
// Weighted after 0 to 750 000, so the share of b.N run unparked, not the
// cost of a hand-off, decided the row. TestRunQueuedParksEveryAcquire
// checks that this start keeps FIFO acquires parked.
func runQueued(b *testing.B, s sem, q queued, acquire func(context.Context, int64, *held) error) {
	holds := make([]*held, q.limit)
	for i := range holds {
		holds[i] = new(held)
		if !s.tryAcquire(1, holds[i]) {
			b.Fatal("a permit of a new semaphore is not free")
		}
	}
	workers := q.perP * runtime.GOMAXPROCS(0)
	// Goroutines claim operations in chunks, as RunParallel's do, so that
	// the shared counter is not one more contended word per operation.
	chunk := min(max(int64(b.N/(workers*100)), 1), 1000)
	var next atomic.Int64
	var arrived, done sync.WaitGroup
	arrived.Add(workers)
	done.Add(workers)
	for w := range workers {
		go func() {
			defer done.Done()
			ctx, h := context.Background(), new(held)
			n := 1 + int64(w)%q.maxWeight
			arrived.Done()
			for {
				end := next.Add(chunk)
				if end-chunk >= int64(b.N) {
					return
				}
				for range min(end, int64(b.N)) - (end - chunk) {
					if err := acquire(ctx, n, h); err != nil {
						panic(err)
					}
					if q.yield {
						runtime.Gosched()
					}
					s.release(h)
					if n++; n > q.maxWeight {
						n = 1 // a compare, not a division, in the timed loop
					}
				}
			}
		}()
	}
	arrived.Wait()
	// Every acquire parks while the permits are held; a goroutine that has
	// not reached its first acquire yet parks behind the queue when it
	// does, so this wait is not needed for correctness, only to start with
	// the queue formed.
	time.Sleep(time.Millisecond)
	b.ResetTimer()
	stopCPU, stopSched := measureCPU(b), measureSched(b)
	for _, h := range holds {
		s.release(h)
	}
	done.Wait()
	b.StopTimer()
	stopCPU()
	stopSched()
}

// BenchmarkWeighted measures a mix of request sizes: 8 goroutines per P
// cycle through weights 1 to 8 on a limit of 16, so large requests wait
// behind small ones and the fairness policy decides who goes next. Like
// BenchmarkContended it starts with the goroutines parked (runQueued).
func BenchmarkWeighted(b *testing.B) {
	const limit = 16
	for _, im := range pick(parkers...) {
		b.Run("impl="+im.name+"/limit=16", func(b *testing.B) {
			s := im.new(limit, limit)
			b.ReportAllocs()
			runQueued(b, s, queued{limit: limit, perP: 8, maxWeight: 8}, s.acquire)
		})
	}
}

// cancelDeadline is short enough that it often passes while an acquirer of
// BenchmarkCancel is parked behind the others, and long enough that the
// acquirer usually gets to park first.
const cancelDeadline = 5 * time.Microsecond

// BenchmarkCancel measures a queue where half the acquires give up: 8
// goroutines per P share one permit and hold it for a short spin; every
// other acquire of each goroutine carries its own deadline of
// cancelDeadline. The cancelled/op metric says what fraction of all acquires
// timed out.
//
// Every acquire with a deadline pays for context.WithTimeout and for the
// Done channel the context makes on first request; impl=ctxonly creates the
// same contexts, asks for their channel and cancels them without a
// semaphore, so its B/op and allocs/op are the context's share of the other
// columns (its ns/op means nothing).
func BenchmarkCancel(b *testing.B) {
	for _, im := range pick(append(parkers[:len(parkers):len(parkers)], "ctxonly")...) {
		b.Run("impl="+im.name, func(b *testing.B) {
			var s sem
			if im.new != nil {
				s = im.new(1, 1)
			}
			var ids, cancelled atomic.Int64
			b.ReportAllocs()
			defer measureCPU(b)()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				h, background := new(held), context.Background()
				for i := ids.Add(1); pb.Next(); i++ {
					ctx, cancel := background, context.CancelFunc(nil)
					if i%2 == 0 {
						ctx, cancel = context.WithTimeout(background, cancelDeadline)
					}
					if s == nil {
						// Any acquire that can wait on ctx asks for its
						// channel, which a context makes on first request.
						_ = ctx.Done()
					} else {
						switch err := s.acquire(ctx, 1, h); {
						case err == nil:
							spin(200)
							s.release(h)
						case errors.Is(err, context.DeadlineExceeded):
							cancelled.Add(1)
						default:
							panic(err)
						}
					}
					if cancel != nil {
						cancel()
					}
				}
			})
			b.ReportMetric(float64(cancelled.Load())/float64(b.N), "cancelled/op")
		})
	}
}

// BenchmarkThrottle measures acquires while the limit moves: of 8
// goroutines per P, one sets the limit to 1 and back to 16 in each of its
// iterations while the others take and return one permit in each of
// theirs. The setter runs as one of the benchmark's goroutines, so the
// scheduler gives it the same share as the acquirers and the churn rate is
// steady from run to run; setlimit/op says how many limit changes there were
// per iteration of any goroutine. Only atomicsem can move its limit with
// permits held: x/sync's Weighted has a fixed size, and so has a channel.
func BenchmarkThrottle(b *testing.B) {
	for _, im := range pick("atomicsem", "atomicsem-barging") {
		b.Run("impl="+im.name+"/limit=1..16", func(b *testing.B) {
			s := im.new(16, 16)
			setter := s.(limitSetter)
			var ids, moves atomic.Int64
			b.ReportAllocs()
			defer measureCPU(b)()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				if ids.Add(1) == 1 {
					for pb.Next() {
						setter.setLimit(1)
						setter.setLimit(16)
						moves.Add(2)
					}
					return
				}
				ctx, h := context.Background(), new(held)
				for pb.Next() {
					if err := s.acquire(ctx, 1, h); err != nil {
						panic(err)
					}
					s.release(h)
				}
			})
			b.ReportMetric(float64(moves.Load())/float64(b.N), "setlimit/op")
		})
	}
}

// BenchmarkQueueLen measures one goroutine taking and returning one permit
// beside 0 or 10 000 parked waiters that do not stand in its way.
//
// The waiters ask for 17 permits of a limit of 16 (the ceiling is 32), which
// no release can grant. In both atomicsem modes such a waiter keeps its
// place in the queue without holding back others, so the measured acquires
// are legal even in FIFO mode, and what the benchmark shows is how the cost
// of an acquire and of a release grows with the number of parked waiters
// that the semaphore must step over. x/sync does not queue a request larger
// than its size at all (it waits on ctx alone), so its column shows an empty
// queue whatever the parked count, and is the reference. A channel cannot park a waiter that does not block the others, and the
// mutex+cond semaphore would wake every waiter on every release, so neither
// runs here.
func BenchmarkQueueLen(b *testing.B) {
	for _, parked := range []int{0, 10_000} {
		for _, im := range pick("atomicsem", "atomicsem-barging", "xsyncsem") {
			for _, op := range []string{"acquire", "tryacquire"} {
				name := fmt.Sprintf("impl=%s/op=%s/parked=%d", im.name, op, parked)
				b.Run(name, func(b *testing.B) {
					s := im.new(16, 32)
					stop := parkOversized(b, s, parked)
					defer stop()
					ctx, h := context.Background(), new(held)
					b.ReportAllocs()
					defer measureCPU(b)()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if op == "acquire" {
							if err := s.acquire(ctx, 1, h); err != nil {
								b.Fatal(err)
							}
						} else if !s.tryAcquire(1, h) {
							b.Fatal("tryAcquire failed beside oversized waiters")
						}
						s.release(h)
					}
					b.StopTimer()
				})
			}
		}
	}
}

// parkOversized parks count goroutines on s, each asking for 17 permits, and
// returns a function that cancels them and waits until they have returned.
func parkOversized(b *testing.B, s sem, count int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.acquire(ctx, 17, new(held)); !errors.Is(err, context.Canceled) {
				panic(fmt.Sprintf("oversized waiter returned %v", err))
			}
		}()
	}
	waitParked(b, s, count)
	return func() {
		cancel()
		wg.Wait()
	}
}

// waitParked waits until count goroutines are parked on s: exactly, for
// semaphores that count their waiters; otherwise by letting the scheduler
// run everything runnable for a while.
func waitParked(b *testing.B, s sem, count int) {
	wc, ok := s.(waiterCounter)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ok && wc.waiters() == count {
			return
		}
		if !ok {
			time.Sleep(time.Duration(count/100+5) * time.Millisecond)
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d waiters parked, want %d", wc.waiters(), count)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// spin burns a little CPU while a permit is held, without allocating or
// blocking, so that waiters queue up behind the holder.
func spin(iterations int) {
	for i := 0; i < iterations; i++ {
		spinSink.Add(1)
	}
}

var spinSink atomic.Int64
