package bench_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// floorpark is a floor only if it keeps the promises it is measured
// against, so these tests hold it to them: FIFO hand-off, and cancellation
// that leaves the semaphore as if the acquire had never happened.

// newFloorpark returns a floorpark semaphore of limit permits and its
// waiter count.
func newFloorpark(limit int64) (sem, waiterCounter) {
	s := impls["floorpark"].new(limit, limit)
	return s, s.(waiterCounter)
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

func TestFloorparkHandsOffInArrivalOrder(t *testing.T) {
	s, wc := newFloorpark(1)
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
		select {
		case err := <-errs[i]:
			if err != nil {
				t.Fatalf("waiter %d: %v", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("waiter %d, the oldest, was not granted", i)
		}
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
}

func TestFloorparkCancelledFrontWaiterPassesOnToThoseBehind(t *testing.T) {
	s, wc := newFloorpark(2)
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
	select {
	case err := <-smallErr:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter behind the cancelled one was not granted the free permit")
	}
	s.release(small)
	s.release(holder)
	requireFree(t, s, wc, 2)
}

func TestFloorparkDoneContextFailsWithPermitsFree(t *testing.T) {
	s, wc := newFloorpark(1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.acquire(ctx, 1, new(held)); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire with a done ctx returned %v, want context.Canceled", err)
	}
	requireFree(t, s, wc, 1)
}

// TestFloorparkCancelRacingGrantKeepsCount lets deadlines expire around
// grants, so that some waiters are granted and cancelled at once and must
// pass the grant on. Whatever the interleaving, no more than limit permits
// may be held at any time, every permit must be back at the end and no
// waiter left queued.
func TestFloorparkCancelRacingGrantKeepsCount(t *testing.T) {
	const limit, workers, rounds = 2, 8, 10_000
	s, wc := newFloorpark(limit)
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
}

// TestHeldFillsOneSizeClass keeps held at the 128 bytes that its doc
// counts on to keep records of different goroutines off each other's cache
// lines.
func TestHeldFillsOneSizeClass(t *testing.T) {
	if size := unsafe.Sizeof(held{}); size != 128 {
		t.Fatalf("held is %d bytes, want 128", size)
	}
}

func TestFloorparkguardRefusesASecondRelease(t *testing.T) {
	s := impls["floorparkguard"].new(1, 1)
	h := new(held)
	if err := s.acquire(context.Background(), 1, h); err != nil {
		t.Fatal(err)
	}
	s.release(h)
	defer func() {
		if recover() == nil {
			t.Fatal("a second release of one acquire did not panic")
		}
		// The refused release returned nothing: the one permit is free
		// once, not twice.
		requireFree(t, s, s.(*floorParkGuardSem), 1)
	}()
	s.release(h)
}
