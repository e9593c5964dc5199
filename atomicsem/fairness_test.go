package atomicsem_test

// Who is served, and in which order: FIFO arrival order, barging, the
// starvation bound and the hand-off it turns on, and requests above the
// limit, which hold back nobody.

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// TestBargingLosersKeepArrivalOrder is the plain-build companion of
// TestScenarioBargingLosersRequeueInArrivalOrder (scenario_hooks_test.go):
// without hooks, the race it stages is reached by timing. Each round parks
// three waiters, releases three permits, which wakes all three, and takes
// them back at once from the test goroutine; when every woken waiter loses
// and goes back to the queue, permits released one at a time must reach
// them in arrival order. (Three, not two: the scheduler tends to run the
// waiter woken last first, so two losers usually settle in reverse order,
// which a requeue at the front happens to put right; three settle in orders
// that a requeue at the front garbles.) Rounds in which a woken waiter won a
// permit are not counted.
func TestBargingLosersKeepArrivalOrder(t *testing.T) {
	const rounds, parked = 200, 3
	allLost := 0
	for range rounds {
		s := mustNew(t, parked, parked, atomicsem.WithBarging(), atomicsem.WithStarvationBound(time.Hour))
		held := mustTake(t, s, parked)
		waiters := make([]*pendingAcquire, parked)
		for i := range waiters {
			waiters[i] = goAcquire(t.Context(), s, 1)
			awaitWaiters(s, i+1)
		}

		held.Release() // wakes them all to compete for the permits
		bargers := make([]token.Token, parked)
		took := 0
		for i := range bargers {
			var ok bool
			if bargers[i], ok = s.TryAcquire(1); ok {
				took++
			}
		}
		if took == parked {
			awaitWaiters(s, parked) // all lost and went back
			allLost++
			for i := range bargers {
				bargers[i].Release()
				served := firstReturned(t, waiters[i:])
				require.Zero(t, served,
					"all lost %d times: waiter %d was served before the older waiter %d", allLost, i+served, i)
			}
		} else {
			for i := range took {
				bargers[i].Release()
			}
		}
		for _, p := range waiters {
			<-p.done
			require.NoError(t, p.err)
			p.tok.Release()
		}
	}
	t.Logf("every woken waiter lost in %d of %d rounds", allLost, rounds)
}

// TestBargingHandOffPassesOverHeadAboveLimit: in barging mode a head that
// has waited past the starvation bound turns the semaphore to hand-off, and
// then the limit drops below its request. Hand-off must not make arrivals
// queue behind a waiter that no release can serve, with permits free and
// no release on its way to serve them.
func TestBargingHandOffPassesOverHeadAboveLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 4, 10, atomicsem.WithBarging())
		a, b := mustTake(t, s, 2), mustTake(t, s, 2)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel() // on failure too, so the bubble does not deadlock
		head := park(t, s, ctx, 4)
		time.Sleep(2 * atomicsem.DefaultStarvationBound)
		a.Release() // the head does not fit and has waited past the bound
		require.NoError(t, s.SetLimit(3))
		require.Equal(t, atomicsem.Stats{Available: 1, Held: 2, Limit: 3, Max: 10, Waiters: 1}, s.Stats())

		wait, cancelWait := context.WithTimeout(context.Background(), time.Second)
		defer cancelWait()
		start := time.Now()
		tok, err := s.Acquire(wait, 1)
		require.NoError(t, err, "an arrival waited for a permit that was free")
		require.Zero(t, time.Since(start))
		tok.Release()
		try, ok := s.TryAcquire(1)
		require.True(t, ok, "TryAcquire refused a free permit")
		try.Release()

		cancel()
		synctest.Wait()
		require.Equal(t, context.Canceled, head.err)
		b.Release()
		require.Equal(t, atomicsem.Stats{Available: 3, Limit: 3, Max: 10}, s.Stats())
	})
}

// TestBargingHandOffStopsTryAcquire: once the waiter a release would serve
// next has waited past the starvation bound, a free permit is kept for it,
// and TryAcquire and Acquire refuse to barge past it.
func TestBargingHandOffStopsTryAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 2, 2, atomicsem.WithBarging())
		a, b := mustTake(t, s, 1), mustTake(t, s, 1)
		head := park(t, s, t.Context(), 2)
		time.Sleep(2 * atomicsem.DefaultStarvationBound)
		a.Release() // one permit free; the head, which needs two, has starved
		require.Equal(t, atomicsem.Stats{Available: 1, Held: 1, Limit: 2, Max: 2, Waiters: 1}, s.Stats())

		_, ok := s.TryAcquire(1)
		require.False(t, ok, "TryAcquire barged past a waiter that waited past the bound")
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_, err := s.Acquire(ctx, 1)
		require.ErrorIs(t, err, context.DeadlineExceeded, "Acquire barged past a waiter that waited past the bound")
		require.False(t, head.returned())

		b.Release()
		synctest.Wait()
		requireGranted(t, head, 2)
		head.tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 2, Limit: 2, Max: 2}, s.Stats())
	})
}

// Bug shape: barging mode turns back from hand-off as soon as a dispatch
// does not stop at a starved waiter, rather than when it grants a waiter
// that has waited less than the bound (the documented exit rule). Here the
// hand-off grants the starved head and stops at a younger waiter: no young
// waiter was granted, so the semaphore must stay in hand-off, and the
// next release must go to the younger waiter, not to an arrival.
func TestBargingHandOffEndsOnlyWithAYoungWaiterGranted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 1, 1, atomicsem.WithBarging())
		held := mustTake(t, s, 1)
		old := park(t, s, t.Context(), 1)
		time.Sleep(2 * atomicsem.DefaultStarvationBound)
		require.NoError(t, s.SetLimit(1)) // a dispatch that stops at old, starved
		require.Equal(t, "starving", atomicsem.QueueState(s))
		young := park(t, s, t.Context(), 1)

		held.Release() // hands the permit to old, stops at young
		synctest.Wait()
		requireGranted(t, old, 1)
		require.Equal(t, "starving", atomicsem.QueueState(s),
			"hand-off ended although no waiter younger than the bound was granted")

		old.tok.Release() // hands the permit to young
		_, ok := s.TryAcquire(1)
		require.False(t, ok, "an arrival barged in while the semaphore should hand off")
		synctest.Wait()
		requireGranted(t, young, 1)
		require.Equal(t, "empty", atomicsem.QueueState(s))
		young.tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 1, Limit: 1, Max: 1}, s.Stats())
	})
}

// Bug shape: in barging mode a release wakes the front waiter to compete for
// a free permit, and before it runs the semaphore turns to hand-off for a
// waiter behind it. A woken waiter that finds the permit free but, seeing
// the hand-off flag, queues again has no release on its way to serve it, so
// with every goroutine parked the permit stays free for ever.
func TestBargingWokenWaiterTakesFreePermitsDuringHandOff(t *testing.T) {
	tests := []struct {
		name  string
		limit int64
	}{
		{"limit=1", 1},
		{"limit=4", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A bound of a nanosecond makes every waiter that is passed over
			// starve at once, so the hand-off flag flips all the time.
			s := mustNew(t, tt.limit, tt.limit, atomicsem.WithBarging(), atomicsem.WithStarvationBound(time.Nanosecond))
			const goroutines, rounds = 64, 1000
			// A stuck semaphore shows as acquires that time out instead of a
			// hung test run.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						tok, err := s.Acquire(ctx, 1)
						if err != nil {
							errs <- err
							return
						}
						// Yield while holding, so that others park behind.
						runtime.Gosched()
						tok.Release()
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err, "stats when it stopped: %+v", s.Stats())
			}
			require.Equal(t, atomicsem.Stats{Available: tt.limit, Limit: tt.limit, Max: tt.limit}, s.Stats())
		})
	}
}

// TestBargingReleasesBesideAWokenWaiterTakeNoLock is the plain-build
// companion of TestScenarioBargingReleasesLeaveTheLockAloneWhileAWakeIsOnItsWay
// (scenario_hooks_test.go), and the check that on two cores stands for the
// barging collapse on many: a release that meets parked waiters while a
// woken one is still on its way must not take the queue lock. Each round
// wakes the front of two waiters and holds the queue lock before that
// waiter can settle (it settles under the lock, so it stays on its way
// until the lock is free); then arrivals take and return the permit,
// which they must do without the lock. Rounds in which the woken waiter
// settled before the test held the lock are tried again. It runs outside
// a synctest bubble, in which a goroutine blocked on a sync.Mutex would
// stall synctest.Wait.
func TestBargingReleasesBesideAWokenWaiterTakeNoLock(t *testing.T) {
	s := mustNew(t, 1, 1, atomicsem.WithBarging(), atomicsem.WithStarvationBound(time.Hour))
	for round := 1; ; round++ {
		held := mustTake(t, s, 1)
		front := goAcquire(t.Context(), s, 1)
		awaitWaiters(s, 1)
		behind := goAcquire(t.Context(), s, 1)
		awaitWaiters(s, 2)
		held.Release() // wakes front
		unlock := atomicsem.LockQueue(s)
		if atomicsem.WordStats(s).Held != 0 {
			// front settled first and holds the permit: not this round.
			unlock()
			releaseAsServed(t, front, behind)
			require.Less(t, round, 1000, "the woken waiter always settled before the test held the lock")
			continue
		}
		done := make(chan bool, 1)
		go func() {
			took := 0
			for range 100 {
				if tok, ok := s.TryAcquire(1); ok {
					took++
					tok.Release()
				}
			}
			done <- took == 100
		}()
		var allTaken, finished bool
		select {
		case allTaken = <-done:
			finished = true
		case <-time.After(10 * time.Second):
		}
		unlock()
		if !finished {
			allTaken = <-done
		}
		releaseAsServed(t, front, behind)
		require.True(t, finished, "a release beside a woken waiter on its way waited for the queue lock (round %d)", round)
		require.True(t, allTaken, "an arrival failed to barge while the woken waiter was on its way")
		require.Equal(t, atomicsem.Stats{Available: 1, Limit: 1, Max: 1}, s.Stats())
		requireQueueFlags(t, s)
		t.Logf("round %d", round)
		return
	}
}

// releaseAsServed waits for each of the pending acquires to be served, in
// whatever order barging serves them, and releases each as it returns.
func releaseAsServed(t *testing.T, pending ...*pendingAcquire) {
	t.Helper()
	for len(pending) > 0 {
		i := firstReturned(t, pending)
		require.NoError(t, pending[i].err)
		pending[i].tok.Release()
		pending = append(pending[:i], pending[i+1:]...)
	}
}

// TestBargingSettledWaiterWakesTheNextForPermitsLeftFree is the plain-build
// companion of the scenario of that name (scenario_hooks_test.go): both
// holders release one after the other, the second, as a rule, while the
// first waiter it woke is still on its way, so that the second waiter is
// left for the first to wake when it settles. A settle that does not
// serve the queue leaves the second parked beside a free permit, with
// every goroutine of the bubble blocked: synctest reports the deadlock.
func TestBargingSettledWaiterWakesTheNextForPermitsLeftFree(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			s := mustNew(t, 2, 2, atomicsem.WithBarging(), atomicsem.WithStarvationBound(time.Hour))
			h1, h2 := mustTake(t, s, 1), mustTake(t, s, 1)
			first := park(t, s, t.Context(), 1)
			second := park(t, s, t.Context(), 1)
			h1.Release() // wakes first
			h2.Release() // usually while first is on its way: wakes nobody
			<-first.done
			<-second.done
			requireGranted(t, first, 1)
			requireGranted(t, second, 1)
			first.tok.Release()
			second.tok.Release()
			require.Equal(t, atomicsem.Stats{Available: 2, Limit: 2, Max: 2}, s.Stats())
		})
	}
}
