package bench_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// floorpark and floorparkword are floors only if they keep the promises
// they are measured against, so these tests hold them to them: FIFO
// hand-off, and cancellation that leaves the semaphore as if the acquire had
// never happened.

// parkFloors are the floors that park waiters; floorparkguard is floorpark
// with a guard in front and is not tested again.
var parkFloors = []string{"floorpark", "floorparkword"}

// forEachParkFloor runs test once for each of parkFloors, with a
// constructor that returns a semaphore of limit permits and its waiter count.
func forEachParkFloor(t *testing.T, test func(t *testing.T, newSem func(limit int64) (sem, waiterCounter))) {
	for _, name := range parkFloors {
		t.Run(name, func(t *testing.T) {
			test(t, func(limit int64) (sem, waiterCounter) {
				s := impls[name].new(limit, limit)
				return s, s.(waiterCounter)
			})
		})
	}
}

// parkOne starts an acquire of n permits on s and waits until it is queued
// behind the queued ones, so that arrival order is exactly the call order.
// The acquire's result arrives on the returned channel.
func parkOne(t *testing.T, s sem, wc waiterCounter, ctx context.Context, n int64, h *held) <-chan error {
	t.Helper()
	before := wc.waiters()
	errc := make(chan error, 1)
	go func() { errc <- s.acquire(ctx, n, h) }()
	deadline := time.Now().Add(5 * time.Second)
	for wc.waiters() != before+1 {
		if time.Now().After(deadline) {
			t.Fatalf("acquire did not queue: %d waiters, want %d", wc.waiters(), before+1)
		}
		time.Sleep(50 * time.Microsecond)
	}
	return errc
}

// awaitGrant waits for an acquire's result on errc and fails the test,
// naming the acquire as what, if it is an error or does not come within
// five seconds.
func awaitGrant(t *testing.T, errc <-chan error, what string) {
	t.Helper()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not granted within 5 s", what)
	}
}

// requireFree checks that exactly free permits are available and nobody
// waits, and leaves them available.
func requireFree(t *testing.T, s sem, wc waiterCounter, free int64) {
	t.Helper()
	if k := wc.waiters(); k != 0 {
		t.Fatalf("%d waiters left queued", k)
	}
	all, more := new(held), new(held)
	if !s.tryAcquire(free, all) {
		t.Fatalf("%d permits are not all free", free)
	}
	if s.tryAcquire(1, more) {
		t.Fatalf("more than %d permits free", free)
	}
	s.release(all)
}

func TestParkFloorHandsOffInArrivalOrder(t *testing.T) {
	forEachParkFloor(t, func(t *testing.T, newSem func(int64) (sem, waiterCounter)) {
		s, wc := newSem(1)
		holder := new(held)
		if !s.tryAcquire(1, holder) {
			t.Fatal("the only permit is not free")
		}
		hs := []*held{new(held), new(held), new(held)}
		errs := make([]<-chan error, len(hs))
		for i, h := range hs {
			errs[i] = parkOne(t, s, wc, context.Background(), 1, h)
		}
		prev := holder
		for i, h := range hs {
			s.release(prev)
			// Hand-off: the permit went to waiter i inside the release, so
			// it is not free even though waiter i may not have run yet.
			if s.tryAcquire(1, new(held)) {
				t.Fatalf("release %d left the permit free instead of handing it to waiter %d", i, i)
			}
			awaitGrant(t, errs[i], fmt.Sprintf("waiter %d, the oldest", i))
			for j := i + 1; j < len(hs); j++ {
				select {
				case err := <-errs[j]:
					t.Fatalf("waiter %d returned (%v) before waiter %d released", j, err, i)
				default:
				}
			}
			prev = h
		}
		s.release(prev)
		requireFree(t, s, wc, 1)
	})
}

func TestParkFloorCancelledFrontWaiterPassesOnToThoseBehind(t *testing.T) {
	forEachParkFloor(t, func(t *testing.T, newSem func(int64) (sem, waiterCounter)) {
		s, wc := newSem(2)
		holder := new(held)
		if !s.tryAcquire(1, holder) {
			t.Fatal("a permit is not free")
		}
		ctx, cancel := context.WithCancel(context.Background())
		big, small := new(held), new(held)
		bigErr := parkOne(t, s, wc, ctx, 2, big)
		// One permit is free, but FIFO keeps it from overtaking big.
		smallErr := parkOne(t, s, wc, context.Background(), 1, small)
		cancel()
		if err := <-bigErr; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter returned %v, want context.Canceled", err)
		}
		awaitGrant(t, smallErr, "the waiter behind the cancelled one, with a permit free")
		s.release(small)
		s.release(holder)
		requireFree(t, s, wc, 2)
	})
}

func TestParkFloorDoneContextFailsWithPermitsFree(t *testing.T) {
	forEachParkFloor(t, func(t *testing.T, newSem func(int64) (sem, waiterCounter)) {
		s, wc := newSem(1)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.acquire(ctx, 1, new(held)); !errors.Is(err, context.Canceled) {
			t.Fatalf("acquire with a done ctx returned %v, want context.Canceled", err)
		}
		requireFree(t, s, wc, 1)
	})
}

// TestParkFloorCancelRacingGrantKeepsCount lets deadlines expire around
// grants, so that some waiters are granted and cancelled at once and must
// pass the grant on. Whatever the interleaving, no more than limit permits
// may be held at any time, every permit must be back at the end and no
// waiter left queued.
func TestParkFloorCancelRacingGrantKeepsCount(t *testing.T) {
	forEachParkFloor(t, func(t *testing.T, newSem func(int64) (sem, waiterCounter)) {
		const limit, workers, rounds = 2, 8, 10_000
		s, wc := newSem(limit)
		var (
			wg     sync.WaitGroup
			inUse  atomic.Int64
			excess atomic.Int64 // the most permits held at once beyond limit
		)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := new(held)
				for range rounds {
					n := 1 + rand.Int64N(limit)
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(5000)))
					switch err := s.acquire(ctx, n, h); {
					case err == nil:
						if over := inUse.Add(n) - limit; over > excess.Load() {
							excess.Store(over)
						}
						spin(100) // hold, so that holders overlap
						inUse.Add(-n)
						s.release(h)
					case !errors.Is(err, context.DeadlineExceeded):
						t.Error(err)
					}
					cancel()
				}
			}()
		}
		wg.Wait()
		if over := excess.Load(); over > 0 {
			t.Fatalf("up to %d permits held beyond the limit of %d", over, limit)
		}
		requireFree(t, s, wc, limit)
	})
}

// TestHeldFillsOneSizeClass keeps held at the 128 bytes that its doc
// counts on to keep records of different goroutines off each other's cache
// lines.
func TestHeldFillsOneSizeClass(t *testing.T) {
	if size := unsafe.Sizeof(held{}); size != 128 {
		t.Fatalf("held is %d bytes, want 128", size)
	}
}

func TestGuardedParkFloorsRefuseASecondRelease(t *testing.T) {
	for _, name := range []string{"floorparkguard", "floorparkword"} {
		t.Run(name, func(t *testing.T) {
			s := impls[name].new(1, 1)
			h := new(held)
			if err := s.acquire(context.Background(), 1, h); err != nil {
				t.Fatal(err)
			}
			s.release(h)
			defer func() {
				if recover() == nil {
					t.Fatal("a second release of one acquire did not panic")
				}
				// The refused release returned nothing: the one permit is
				// free once, not twice.
				requireFree(t, s, s.(waiterCounter), 1)
			}()
			s.release(h)
		})
	}
}

// TestFloorparkwordPassesTheLockByUnlessQueued checks what floorparkword
// adds to floorparkguard: with nobody queued, acquires and releases take
// and return permits without the lock; once a waiter is queued, arrivals
// queue behind it even with permits free.
func TestFloorparkwordPassesTheLockByUnlessQueued(t *testing.T) {
	s := impls["floorparkword"].new(2, 2)
	f := s.(*floorParkWordSem)
	one, other, bigHeld := new(held), new(held), new(held)
	f.mu.Lock()
	if !s.tryAcquire(1, one) {
		t.Fatal("tryAcquire with a permit free and nobody queued failed while the lock was held")
	}
	acquired := make(chan error, 1)
	go func() { acquired <- s.acquire(context.Background(), 1, other) }()
	awaitGrant(t, acquired, "acquire with a permit free and nobody queued, while the lock is held")
	released := make(chan struct{})
	go func() { s.release(one); close(released) }()
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("release with nobody queued waited for the lock")
	}
	f.mu.Unlock()

	// One permit is free (one is held by the acquire above). A waiter for
	// two queues; the free permit must not go to an arrival behind it.
	big := parkOne(t, s, f, context.Background(), 2, bigHeld)
	if s.tryAcquire(1, new(held)) {
		t.Fatal("tryAcquire overtook a queued waiter")
	}
	select {
	case err := <-big:
		t.Fatalf("the waiter for two returned (%v) with one permit free", err)
	default:
	}
	s.release(other)
	awaitGrant(t, big, "the waiter for two, with two permits free")
	s.release(bigHeld)
	requireFree(t, s, f, 2)
}
