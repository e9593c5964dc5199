package group_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/group"
)

// TestMapReturnsResultsInInputOrder checks that results come back in the
// order of the input although the calls end in the reverse order.
func TestMapReturnsResultsInInputOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 40
		in := make([]int, n)
		for i := range in {
			in[i] = i
		}
		out, err := group.Map(background, newSem(t, 4, 4), in, func(_ context.Context, x int) (int, error) {
			time.Sleep(time.Duration(n-x) * time.Millisecond)
			return x * x, nil
		})
		require.NoError(t, err)
		require.Len(t, out, n)
		for i, y := range out {
			require.Equal(t, i*i, y)
		}
	})
}

// TestMapWithEmptyInputReturnsAtOnce checks that an empty or nil input
// returns an empty, non-nil result without calling f or looking at the
// semaphore, even a closed one, and even with a nil f or a done context.
func TestMapWithEmptyInputReturnsAtOnce(t *testing.T) {
	sem := newSem(t, 1, 1)
	sem.Close()
	done, cancel := context.WithCancel(background)
	cancel()
	for _, in := range [][]int{nil, {}} {
		out, err := group.Map[int, string](done, sem, in, nil)
		require.NoError(t, err)
		require.NotNil(t, out)
		require.Empty(t, out)
	}
}

// TestMapStopsStartingCallsAfterTheFirstError runs calls of a second each
// two at a time; the sixth fails half-way through its second. The calls
// already running finish, with their context cancelled by the error, and
// none starts after it.
func TestMapStopsStartingCallsAfterTheFirstError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := make([]int, 20)
		for i := range in {
			in[i] = i
		}
		var (
			mu     sync.Mutex
			called []int
			causes = map[int]error{}
		)
		start := time.Now()
		out, err := group.Map(background, newSem(t, 2, 2), in, func(ctx context.Context, x int) (int, error) {
			mu.Lock()
			called = append(called, x)
			mu.Unlock()
			if x == 5 {
				time.Sleep(500 * time.Millisecond)
				return 0, errBoom
			}
			time.Sleep(time.Second)
			mu.Lock()
			causes[x] = context.Cause(ctx)
			mu.Unlock()
			return x, nil
		})
		require.ErrorIs(t, err, errBoom)
		require.Nil(t, out)
		require.ElementsMatch(t, []int{0, 1, 2, 3, 4, 5}, called)
		require.ErrorIs(t, causes[4], errBoom, "the call running beside the failure sees it")
		require.NoError(t, causes[3], "calls that ended before the failure did not")
		require.Equal(t, 3*time.Second, time.Since(start), "Map waits for the running call")
	})
}

// TestMapStopsAtTheFailingElementWithOneCallAtATime checks the early stop
// exactly: with a limit of 1 the calls run in order, and none follows the
// one that fails.
func TestMapStopsAtTheFailingElementWithOneCallAtATime(t *testing.T) {
	in := make([]int, 100)
	for i := range in {
		in[i] = i
	}
	var calls atomic.Int64
	sem := newSem(t, 1, 1)
	_, err := group.Map(background, sem, in, func(_ context.Context, x int) (int, error) {
		calls.Add(1)
		if x == 10 {
			return 0, errBoom
		}
		return x, nil
	})
	require.ErrorIs(t, err, errBoom)
	require.EqualValues(t, 11, calls.Load())
	requireIdle(t, sem)
}

// TestMapReturnsCtxErrWhenCancelledBeforeEveryCallStarted checks that a
// context that expires part-way stops Map with its error, even though no
// call failed.
func TestMapReturnsCtxErrWhenCancelledBeforeEveryCallStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(background, 2500*time.Millisecond)
		defer cancel()
		var calls atomic.Int64
		sem := newSem(t, 1, 1)
		out, err := group.Map(ctx, sem, make([]int, 10), func(context.Context, int) (int, error) {
			calls.Add(1)
			time.Sleep(time.Second)
			return 1, nil // ignores its context
		})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Nil(t, out)
		require.EqualValues(t, 3, calls.Load())
		requireIdle(t, sem)
	})
}

// TestMapFollowsTheLimitAsItMoves checks that Map's concurrency follows
// SetLimit both ways: lowering it lets the running calls finish and starts
// no new one until they are under the new limit; raising it starts waiting
// calls at once, while the running ones are still running.
func TestMapFollowsTheLimitAsItMoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 4, 8)
		var inFlight gauge
		finish := make(chan struct{})
		result := make(chan error)
		go func() {
			_, err := group.Map(background, sem, make([]int, 30), func(context.Context, int) (int, error) {
				inFlight.add(1)
				<-finish
				inFlight.add(-1)
				return 0, nil
			})
			result <- err
		}()
		synctest.Wait()
		require.EqualValues(t, 4, inFlight.now.Load())

		require.NoError(t, sem.SetLimit(1))
		for _, want := range []int64{3, 2, 1, 1} {
			finish <- struct{}{}
			synctest.Wait()
			require.EqualValues(t, want, inFlight.now.Load())
		}

		require.NoError(t, sem.SetLimit(3))
		synctest.Wait()
		require.EqualValues(t, 3, inFlight.now.Load(), "the raise starts calls without any returning")

		close(finish)
		require.NoError(t, <-result)
		require.EqualValues(t, 4, inFlight.max.Load())
		requireIdle(t, sem)
	})
}

// TestMapCallsEveryElementOnceWhileSetLimitMoves maps 10 000 elements while
// another goroutine moves the limit up and down, and checks that every
// element is called exactly once, that the results are in order, and that
// every call holds a permit: the calls in flight never outnumber the
// permits held. (Calls count themselves in after their permit is granted
// and out before it is released, under a lock that also covers reading the
// semaphore's count, so the comparison is exact. That the permits held stay
// under the limit is the semaphore's own guarantee, tested in its package.)
func TestMapCallsEveryElementOnceWhileSetLimitMoves(t *testing.T) {
	const n = 10_000
	sem := newSem(t, 4, 8)
	in := make([]int, n)
	for i := range in {
		in[i] = i
	}
	calls := make([]atomic.Int32, n)
	var (
		mu        sync.Mutex
		inFlight  int64
		most      int64
		violation [2]int64
	)
	stop := make(chan struct{})
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		rng := rand.New(rand.NewPCG(7, 7))
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := sem.SetLimit(rng.Int64N(9)); err != nil {
				t.Error(err)
				return
			}
			runtime.Gosched()
			if err := sem.SetLimit(8); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	out, err := group.Map(background, sem, in, func(_ context.Context, x int) (int, error) {
		calls[x].Add(1)
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		if held := sem.Stats().Held; inFlight > held && violation[0] == 0 {
			violation = [2]int64{inFlight, held}
		}
		mu.Unlock()
		runtime.Gosched()
		mu.Lock()
		inFlight--
		mu.Unlock()
		return -x, nil
	})
	close(stop)
	<-churned
	require.NoError(t, err)
	require.Zero(t, violation, "[calls in flight, permits held]")
	require.Greater(t, most, int64(1), "calls ran side by side")
	for i := range n {
		require.EqualValues(t, 1, calls[i].Load(), "calls of element %d", i)
		require.Equal(t, -i, out[i])
	}
	requireIdle(t, sem)
}

// TestMapGoroutinesDoNotGrowWithTheInput maps a million elements (a
// quarter of that under the race detector, which is slower) at a limit of
// 8 and checks, from inside the calls, that the process never runs more
// goroutines than it did before Map plus one per permit, with a little room
// for workers that are ending: the number follows the limit, not the input.
func TestMapGoroutinesDoNotGrowWithTheInput(t *testing.T) {
	n := 1 << 20
	if raceEnabled {
		n >>= 2
	}
	const limit = 8
	sem := newSem(t, limit, limit)
	base := int64(runtime.NumGoroutine())
	var most atomic.Int64
	out, err := group.Map(background, sem, make([]struct{}, n), func(_ context.Context, _ struct{}) (bool, error) {
		g := int64(runtime.NumGoroutine())
		for {
			m := most.Load()
			if g <= m || most.CompareAndSwap(m, g) {
				break
			}
		}
		return true, nil
	})
	require.NoError(t, err)
	require.Len(t, out, n)
	require.LessOrEqual(t, most.Load()-base, int64(2*limit), "goroutines beyond the %d before Map", base)
}

// TestMapDoesNotWaitForAPermitOnceEveryElementIsClaimed lowers the limit
// to 0 from the last call. Map must still return: the caller, if it is
// waiting for a permit for a further element, stops waiting once a worker
// has claimed the last one. The worker claims it without waiting, while the
// caller yields before it waits, or, in barging mode, while it waits.
func TestMapDoesNotWaitForAPermitOnceEveryElementIsClaimed(t *testing.T) {
	tests := []struct {
		name string
		opts []atomicsem.Option
	}{
		{"fifo", nil},
		{"barging", []atomicsem.Option{atomicsem.WithBarging()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sem, err := atomicsem.New(1, 1, tt.opts...)
				require.NoError(t, err)
				out, err := group.Map(background, sem, []int{0, 1}, func(_ context.Context, x int) (int, error) {
					if x == 1 {
						if err := sem.SetLimit(0); err != nil {
							t.Error(err)
						}
					}
					return x + 1, nil
				})
				require.NoError(t, err)
				require.Equal(t, []int{1, 2}, out)
				requireIdle(t, sem)
			})
		})
	}
}

// TestMapOnASemaphoreWithMaxZeroFails checks that Map reports at once that
// no limit could ever admit its calls.
func TestMapOnASemaphoreWithMaxZeroFails(t *testing.T) {
	out, err := group.Map(background, newSem(t, 0, 0), []int{1}, func(_ context.Context, x int) (int, error) {
		t.Error("f called")
		return x, nil
	})
	require.ErrorIs(t, err, atomicsem.ErrExceedsMax)
	require.Nil(t, out)
}
