package bench_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// floorpark and floorparkword are floors only if they keep the promises
// they are measured against, so these tests hold them to them: FIFO
// hand-off, and cancellation that leaves the semaphore as if the acquire had
// never happened.

// forEachParkFloor runs test once for each floor that parks waiters, with a
// constructor that returns a semaphore of limit permits and its waiter
// count.
func forEachParkFloor(t *testing.T, test func(t *testing.T, newSem func(limit int64) (sem, waiterCounter))) {
	for _, name := range []string{"floorpark", "floorparkword"} {
		t.Run(name, func(t *testing.T) {
			test(t, func(limit int64) (sem, waiterCounter) {
				s := impls[name].new(limit, limit)
				return s, s.(waiterCounter)
			})
		})
	}
}

func TestParkFloorHandsOffInArrivalOrder(t *testing.T) {
	forEachParkFloor(t, func(t *testing.T, newSem func(int64) (sem, waiterCounter)) {
		s, wc := newSem(1)
		holder := new(held)
		require.True(t, s.tryAcquire(1, holder), "the only permit is not free")
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
			require.False(t, s.tryAcquire(1, new(held)),
				"release %d left the permit free instead of handing it to waiter %d", i, i)
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
		require.True(t, s.tryAcquire(1, holder), "a permit is not free")
		ctx, cancel := context.WithCancel(context.Background())
		big, small := new(held), new(held)
		bigErr := parkOne(t, s, wc, ctx, 2, big)
		// One permit is free, but FIFO keeps it from overtaking big.
		smallErr := parkOne(t, s, wc, context.Background(), 1, small)
		cancel()
		require.ErrorIs(t, <-bigErr, context.Canceled)
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
		require.ErrorIs(t, s.acquire(ctx, 1, new(held)), context.Canceled)
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
					switch err := s.acquire(ctx, n, h); err {
					case nil:
						over := inUse.Add(n) - limit
						for e := excess.Load(); over > e && !excess.CompareAndSwap(e, over); e = excess.Load() {
						}
						spin(100) // hold, so that holders overlap
						inUse.Add(-n)
						s.release(h)
					case context.DeadlineExceeded:
					default:
						t.Error(err)
					}
					cancel()
				}
			}()
		}
		wg.Wait()
		require.Zero(t, excess.Load(), "permits held beyond the limit of %d", limit)
		requireFree(t, s, wc, limit)
	})
}

func TestParkFloorWithGuardRefusesASecondRelease(t *testing.T) {
	s := impls["floorparkword"].new(1, 1)
	h := new(held)
	require.NoError(t, s.acquire(context.Background(), 1, h))
	s.release(h)
	require.PanicsWithValue(t, "floorparkword: released twice", func() { s.release(h) })
	// The refused release returned nothing: the one permit is free once,
	// not twice.
	requireFree(t, s, s.(waiterCounter), 1)
}

// TestParkFloorWithWordPassesTheLockByUnlessQueued checks what
// floorparkword adds to floorpark: with nobody queued, acquires and
// releases take and return permits without the lock; once a waiter is
// queued, arrivals queue behind it even with permits free.
func TestParkFloorWithWordPassesTheLockByUnlessQueued(t *testing.T) {
	s := impls["floorparkword"].new(2, 2)
	f := s.(*floorParkWordSem)
	one, other, bigHeld := new(held), new(held), new(held)
	f.mu.Lock()
	require.True(t, s.tryAcquire(1, one),
		"tryAcquire with a permit free and nobody queued failed while the lock was held")
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
	require.False(t, s.tryAcquire(1, new(held)), "tryAcquire overtook a queued waiter")
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
