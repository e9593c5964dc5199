//go:build atomicsem_hooks

package atomicsem_test

// Scenarios that stop one goroutine at an exact hook site inside the
// semaphore while the test acts, so that an interleaving that is a
// one-in-a-million accident under load happens every time. Build with
// -tags atomicsem_hooks.

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"sync/atomic"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/internal/hook"
	"github.com/atomicsem/atomicsem/token"
)

// Bug shape (golang/go#63615): a grant that races the waiter's cancellation.
// The waiter's context is cancelled while the releasing goroutine, holding
// the queue lock, is about to grant it the permits, so the waiter has chosen
// ctx.Done and can only learn of the grant afterwards. It must return
// ctx.Err() and pass the permits on to the next waiter, leaving Stats exact;
// a waiter that drops them leaks a permit, one that keeps them returns an
// error while holding permits nobody will release.
func TestScenarioGrantRacingCancelIsPassedOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 1, 1)
		held := mustTake(t, s, 1)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		first := park(t, s, ctx, 1)
		second := park(t, s, t.Context(), 1)

		// Stop the release in dispatch, between its load of the word and the
		// CAS that grants first, and then at the next word change: first's
		// cancellation handing the permit back.
		st := stopAtDispatchCAS(t, 2)
		released := goRelease(held)
		require.Equal(t, hook.BeforeCAS, st.waitStop())

		// first wakes on ctx.Done and queues for the lock that the release
		// holds; the grant is decided before first can withdraw.
		cancel()
		st.resume()
		require.Equal(t, hook.BeforeCAS, st.waitStop())
		require.False(t, first.returned())
		require.Equal(t, atomicsem.Stats{Available: 0, Held: 1, Limit: 1, Max: 1}, atomicsem.WordStats(s),
			"first should hold the grant while its cancellation hands it on")
		st.resume()

		synctest.Wait()
		<-released
		require.True(t, first.returned())
		require.ErrorIs(t, first.err, context.Canceled)
		require.Zero(t, first.tok.Permits())
		requireGranted(t, second, 1)
		require.Equal(t, atomicsem.Stats{Available: 0, Held: 1, Limit: 1, Max: 1}, s.Stats())
		second.tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 1, Held: 0, Limit: 1, Max: 1}, s.Stats())
	})
}

// Bug shape: the other side of the same race. A waiter that was granted its
// permits and woken, and whose context is cancelled before it returns, owns
// the permits: it must return them as a token, not drop them and not also
// report ctx.Err().
func TestScenarioGrantBeforeCancelKeepsThePermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 1, 1)
		held := mustTake(t, s, 1)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		p := park(t, s, ctx, 1)

		st := installStopper(t, func(site hook.Site) bool { return site == hook.AfterWake })
		held.Release()
		require.Equal(t, hook.AfterWake, st.waitStop())
		cancel()
		st.resume()

		synctest.Wait()
		requireGranted(t, p, 1)
		require.Equal(t, atomicsem.Stats{Available: 0, Held: 1, Limit: 1, Max: 1}, s.Stats())
		p.tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 1, Held: 0, Limit: 1, Max: 1}, s.Stats())
	})
}

// Bug shape: the same race where the release wakes the waiter only after
// it has released the queue lock (the front hand-off). The cancelled waiter
// takes the lock between the grant and the wake-up, finds itself granted
// with no wake-up to consume, and must wait for it before it recycles its
// record. If it does not, the late wake-up lands on the recycled record and
// wakes the next Acquire to park on it, which then queues itself a second
// time.
func TestScenarioCancelBetweenHandOffAndWakeWaitsForTheWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 1, 1)
		held := mustTake(t, s, 1)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		first := park(t, s, ctx, 1)
		second := park(t, s, t.Context(), 1) // behind first, so the release hands off without a walk

		var wakes atomic.Int32
		st := installStopper(t, func(site hook.Site) bool {
			return site == hook.BeforeWake && wakes.Add(1) == 1 // this release's only
		})
		released := goRelease(held)
		require.Equal(t, hook.BeforeWake, st.waitStop())

		// first is granted and off the queue, the lock is free, and its
		// wake-up has not been sent. Its cancellation must wait for it.
		cancel()
		synctest.Wait()
		require.False(t, first.returned(), "first should wait for the wake-up it was promised")
		require.Equal(t, atomicsem.Stats{Available: 0, Held: 1, Limit: 1, Max: 1, Waiters: 1}, s.Stats())
		st.resume()

		synctest.Wait()
		<-released
		require.True(t, first.returned())
		require.ErrorIs(t, first.err, context.Canceled)
		requireGranted(t, second, 1)
		require.Equal(t, atomicsem.Stats{Available: 0, Held: 1, Limit: 1, Max: 1}, s.Stats())

		// first's record is reused by the next waiter, which must stay
		// parked until a release serves it, and be served once.
		third := park(t, s, t.Context(), 1)
		fourth := park(t, s, t.Context(), 1)
		second.tok.Release()
		synctest.Wait()
		requireGranted(t, third, 1)
		require.False(t, fourth.returned())
		require.Equal(t, atomicsem.Stats{Available: 0, Held: 1, Limit: 1, Max: 1, Waiters: 1}, s.Stats())
		third.tok.Release()
		synctest.Wait()
		requireGranted(t, fourth, 1)
		fourth.tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 1, Held: 0, Limit: 1, Max: 1}, s.Stats())
	})
}

// Bug shape (tokio-rs/tokio#8020): an operation that loads the word before
// Close and writes back a word built from its stale copy drops the closed
// flag, and the semaphore reopens. Each operation here is stopped between
// its load and its CAS while Close runs; afterwards the semaphore must still
// be closed and the operation must have decided on the closed word.
func TestScenarioClosedFlagSurvivesRacingCAS(t *testing.T) {
	tests := []struct {
		name string
		// op runs the racing operation on a semaphore built New(2, 4) with
		// one token of 1 taken (passed in).
		op   func(s *atomicsem.Semaphore, tok *token.Token) any
		want any
		// stats after Close and op.
		stats atomicsem.Stats
	}{
		{
			name:  "Release",
			op:    func(_ *atomicsem.Semaphore, tok *token.Token) any { tok.Release(); return nil },
			stats: atomicsem.Stats{Available: 2, Held: 0, Limit: 2, Max: 4, Closed: true},
		},
		{
			name:  "Forget",
			op:    func(_ *atomicsem.Semaphore, tok *token.Token) any { tok.Forget(); return nil },
			stats: atomicsem.Stats{Available: 1, Held: 0, Limit: 1, Max: 4, Closed: true},
		},
		{
			name:  "TryRelease",
			op:    func(s *atomicsem.Semaphore, _ *token.Token) any { return s.TryRelease(1) },
			want:  false,
			stats: atomicsem.Stats{Available: 1, Held: 1, Limit: 2, Max: 4, Closed: true},
		},
		{
			name:  "SetLimit",
			op:    func(s *atomicsem.Semaphore, _ *token.Token) any { return s.SetLimit(4) },
			want:  atomicsem.ErrClosed,
			stats: atomicsem.Stats{Available: 1, Held: 1, Limit: 2, Max: 4, Closed: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := mustNew(t, 2, 4)
				tok := mustTake(t, s, 1)

				var stops atomic.Int32
				st := installStopper(t, func(site hook.Site) bool {
					return site == hook.BeforeCAS && stops.Add(1) == 1
				})
				got := make(chan any, 1)
				go func() { got <- tt.op(s, tok) }()
				require.Equal(t, hook.BeforeCAS, st.waitStop())
				s.Close()
				st.resume()

				if err, ok := tt.want.(error); ok {
					require.ErrorIs(t, (<-got).(error), err)
				} else {
					require.Equal(t, tt.want, <-got)
				}
				require.Equal(t, tt.stats, s.Stats())
				require.False(t, s.TryRelease(1), "the semaphore reopened")
				if tok.Permits() > 0 {
					tok.Release()
				}
			})
		})
	}
}

// Bug shape: in barging mode a release wakes parked waiters to compete for
// the permits, and an arrival may take them first; the waiters that lose go
// back to the queue. A loser that goes back to the front reverses two that
// lose in arrival order, and the next release then serves the younger
// first, against the promise that parked waiters keep FIFO order among
// themselves. Each loser must go back to its place by arrival, whichever
// settles first.
func TestScenarioBargingLosersRequeueInArrivalOrder(t *testing.T) {
	tests := []struct {
		name        string
		settleFirst int // 0: the older waiter, 1: the younger
	}{
		{"older settles first", 0},
		{"younger settles first", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := mustNew(t, 2, 2, atomicsem.WithBarging(), atomicsem.WithStarvationBound(time.Hour))
				both := mustTake(t, s, 2)
				older := parkNoted(t, s, t.Context(), 1)
				younger := parkNoted(t, s, t.Context(), 1)
				waiters := []*pendingAcquire{older.pendingAcquire, younger.pendingAcquire}

				// One release of two permits wakes both (successive
				// releases wake nobody while a woken waiter is on its
				// way), and each stops as it wakes.
				st, stopNoMore := stopWakeUps(t)
				both.Release()
				require.Equal(t, hook.AfterWake, st.waitStop())
				require.Equal(t, hook.AfterWake, st.waitStop())

				// An arrival takes both permits; both woken waiters lose.
				b1, b2 := mustTake(t, s, 1), mustTake(t, s, 1)
				stopNoMore()
				st.resumeWaiter(t, []*notedAcquire{older, younger}[tt.settleFirst])
				synctest.Wait()
				st.resume()
				synctest.Wait()
				requireReturned(t, waiters)
				require.Equal(t, atomicsem.Stats{Available: 0, Held: 2, Limit: 2, Max: 2, Waiters: 2}, s.Stats())
				requireQueueFlags(t, s)

				b1.Release()
				synctest.Wait()
				requireReturned(t, waiters, 0)
				requireGranted(t, older.pendingAcquire, 1)
				older.tok.Release()
				b2.Release()
				synctest.Wait()
				requireGranted(t, younger.pendingAcquire, 1)
				younger.tok.Release()
				require.Equal(t, atomicsem.Stats{Available: 2, Held: 0, Limit: 2, Max: 2}, s.Stats())
			})
		})
	}
}

// The same in arrival order: a waiter that asks for more than the limit is
// passed over while the limit stays low, but keeps its place. A younger
// waiter woken past it that loses its permits to an arrival goes back
// behind it, not to the front, so once the limit admits the older waiter
// it is served first and holds back the younger, as FIFO order says.
func TestScenarioBargingLoserRequeuesBehindOlderWaiterAboveLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 1, 3, atomicsem.WithBarging(), atomicsem.WithStarvationBound(time.Hour))
		held := mustTake(t, s, 1)
		large := park(t, s, t.Context(), 2) // above the limit of 1
		small := park(t, s, t.Context(), 1)
		waiters := []*pendingAcquire{large, small}

		st, stopNoMore := stopWakeUps(t)
		held.Release() // passes over large, wakes small
		require.Equal(t, hook.AfterWake, st.waitStop())
		barger := mustTake(t, s, 1)
		stopNoMore()
		st.resume() // small loses and goes back to the queue
		synctest.Wait()
		requireReturned(t, waiters)

		// The limit now admits large, which does not fit in the one free
		// permit yet; it must hold small back.
		require.NoError(t, s.SetLimit(2))
		synctest.Wait()
		requireReturned(t, waiters)

		barger.Release()
		synctest.Wait()
		requireReturned(t, waiters, 0)
		requireGranted(t, large, 2)
		large.tok.Release()
		synctest.Wait()
		requireGranted(t, small, 1)
		small.tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 2, Held: 0, Limit: 2, Max: 3}, s.Stats())
	})
}

// Invariant I8: in FIFO mode, while the word shows that a queued waiter
// fits under the limit (the eligible flag), only the holder of the queue
// lock changes it. A hand-off that leaves the word as it was relies on it
// and skips its compare-and-swap. Here the release that hands its permit
// to the front waiter is stopped under the lock at that point, with a
// second waiter still eligible, while every lock-free writer tries the
// word: TryAcquire must refuse, and a token's Release and TryRelease must
// wait for the lock. The word must not move until the hand-off commits.
// (Real time rather than a synctest bubble: the writers block on the
// mutex, which a bubble does not count as durably blocked.)
func TestScenarioEligibleWordIsWrittenOnlyUnderTheLock(t *testing.T) {
	s := mustNew(t, 2, 4)
	a, b := mustTake(t, s, 1), mustTake(t, s, 1)
	first := goAcquire(t.Context(), s, 1)
	awaitWaiters(s, 1)
	second := goAcquire(t.Context(), s, 1)
	awaitWaiters(s, 2)
	before := atomicsem.WordStats(s)
	require.Equal(t, atomicsem.Stats{Available: 0, Held: 2, Limit: 2, Max: 4}, before)

	// Stop the release at its commit, holding the lock: the first
	// BeforeCAS after a dispatch began.
	st := stopAtDispatchCAS(t, 1)
	released := goRelease(a)
	site, stopped := st.waitStopUnless(released)
	require.True(t, stopped, "the release returned without handing its permit on under the lock")
	require.Equal(t, hook.BeforeCAS, site)

	_, ok := s.TryAcquire(1)
	require.False(t, ok, "TryAcquire took a permit past an eligible waiter")
	writers := make(chan string, 2)
	go func() { b.Release(); writers <- "Release" }()
	go func() { // reports rather than requires: this is not the test's goroutine
		if !s.TryRelease(1) {
			writers <- "TryRelease (refused)"
			return
		}
		writers <- "TryRelease"
	}()
	time.Sleep(20 * time.Millisecond) // let them go as far as they can
	require.Equal(t, before, atomicsem.WordStats(s), "the word changed while the hand-off held the lock")
	select {
	case w := <-writers:
		t.Fatalf("%s finished while the hand-off held the lock", w)
	default:
	}

	st.resume()
	<-released
	var finished []string
	for range 2 {
		finished = append(finished, <-writers)
	}
	require.ElementsMatch(t, []string{"Release", "TryRelease"}, finished)
	<-first.done
	<-second.done
	require.NoError(t, first.err)
	require.NoError(t, second.err)
	first.tok.Release()
	second.tok.Release()
	require.Equal(t, atomicsem.Stats{Available: 3, Held: 0, Limit: 3, Max: 4}, s.Stats())
	requireQueueFlags(t, s)
}

// Bug shape: a barging arrival that finds the permits taken goes straight
// to the queue lock, and from there to the queue, although the permits come
// back a moment later on another core: with two Ps contending at limit 1,
// most acquires then pay for the lock and a park where a short spin would
// have found the permit. It must spin first, and take permits that come
// free meanwhile without the lock. The test holds the queue lock
// for the whole scenario, so an arrival that waits for the lock cannot
// return; it runs outside a synctest bubble, in which a goroutine blocked
// on a sync.Mutex would stall synctest.Wait.
func TestScenarioBargingArrivalSpinsForPermitsAboutToBeReleased(t *testing.T) {
	t.Cleanup(atomicsem.ForceSpinning())
	s := mustNew(t, 1, 1, atomicsem.WithBarging())
	held := mustTake(t, s, 1)
	var spins atomic.Int32
	st := installStopper(t, func(site hook.Site) bool {
		return site == hook.Spin && spins.Add(1) == 1 // the first try only
	})

	unlock := atomicsem.LockQueue(s)
	arrival := goAcquire(t.Context(), s, 1)
	// giveUp ends the scenario if the arrival blocks on the lock.
	giveUp := func(msg string) {
		unlock()
		if held.Permits() > 0 {
			held.Release()
		}
		<-arrival.done
		arrival.tok.Release()
		t.Fatal(msg)
	}
	timeout := make(chan struct{})
	time.AfterFunc(10*time.Second, func() { close(timeout) })
	if _, ok := st.waitStopUnless(timeout); !ok {
		giveUp("the arrival went to the queue lock without spinning")
	}
	held.Release() // no waiter is queued: a lock-free return
	st.resume()
	select {
	case <-arrival.done:
	case <-timeout:
		giveUp("the arrival waited for the queue lock instead of taking the released permit")
	}
	unlock()
	requireGranted(t, arrival, 1)
	arrival.tok.Release()
	require.Equal(t, atomicsem.Stats{Available: 1, Held: 0, Limit: 1, Max: 1}, s.Stats())
}

// Bug shape (golang/go#63615, the order x/sync's TestWeightedAcquireCanceled
// checks): the waiter's ctx is cancelled first, and the permits are granted
// to it afterwards, by a release that ran before the waiter noticed the
// cancellation. When the waiter runs, both its wake-up and ctx.Done are
// ready, and a select that picks either returns a token in about half of
// the rounds. A done ctx must win: Acquire returns ctx.Err() and the permits
// go on to the next waiter, or back to the semaphore. Each round stops the
// waiter after it has queued and before it waits, cancels, releases, and
// lets it go on; twenty rounds leave a coin-flip fault one chance in a
// million.
func TestScenarioCancelThenGrantReturnsCtxErr(t *testing.T) {
	tests := []struct {
		name   string
		opts   []atomicsem.Option
		behind bool // a second waiter queues behind the cancelled one
	}{
		{name: "fifo dispatch grant", opts: nil},
		{name: "fifo front hand-off", opts: nil, behind: true},
		{name: "barging wake", opts: []atomicsem.Option{atomicsem.WithBarging()}},
		{name: "barging wake with a waiter behind", opts: []atomicsem.Option{atomicsem.WithBarging()}, behind: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for round := range 20 {
				t.Run(fmt.Sprint("round=", round), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						s := mustNew(t, 1, 1, tt.opts...)
						held := mustTake(t, s, 1)
						ctx, cancel := context.WithCancel(t.Context())
						st := stopFirstPark(t)
						first := goAcquire(ctx, s, 1)
						require.Equal(t, hook.BeforePark, st.waitStop())
						var second *pendingAcquire
						if tt.behind {
							second = park(t, s, t.Context(), 1)
						}

						cancel()
						held.Release() // grants first (FIFO) or wakes it (barging)
						st.resume()
						synctest.Wait()

						require.True(t, first.returned())
						require.ErrorIs(t, first.err, context.Canceled, "a token returned after its ctx was done")
						require.Zero(t, first.tok.Permits())
						if second != nil {
							requireGranted(t, second, 1)
							second.tok.Release()
						}
						require.Equal(t, atomicsem.Stats{Available: 1, Limit: 1, Max: 1}, s.Stats())
						requireQueueFlags(t, s)
					})
				})
			}
		})
	}
}

// The same order on the barging path of a woken waiter that lost its race
// and went back to the queue: its ctx is cancelled while it is requeued,
// and the next release wakes it again before it notices. It must return
// ctx.Err() and pass the wake-up on, not take the permits.
func TestScenarioCancelThenWakeOfARequeuedWaiterReturnsCtxErr(t *testing.T) {
	for round := range 20 {
		t.Run(fmt.Sprint("round=", round), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := mustNew(t, 1, 1, atomicsem.WithBarging())
				held := mustTake(t, s, 1)
				ctx, cancel := context.WithCancel(t.Context())
				first := park(t, s, ctx, 1)

				// Wake first, let an arrival take the permit meanwhile, and
				// stop first when it has queued again.
				st := stopWakeThenRequeue(t)
				held.Release()
				require.Equal(t, hook.AfterWake, st.waitStop())
				arrival := mustTake(t, s, 1)
				st.resume()
				require.Equal(t, hook.BeforePark, st.waitStop())
				require.Equal(t, 1, s.Stats().Waiters, "the loser queues again")

				cancel()
				arrival.Release() // wakes first again
				st.resume()
				synctest.Wait()

				require.True(t, first.returned())
				require.ErrorIs(t, first.err, context.Canceled)
				require.Equal(t, atomicsem.Stats{Available: 1, Limit: 1, Max: 1}, s.Stats())
				requireQueueFlags(t, s)
			})
		})
	}
}

// Bug shape: a barging waiter that has waited past the starvation bound is
// woken, loses the permit to an arrival, and goes back to the queue. If
// going back does not turn the semaphore to hand-off, arrivals keep
// taking the permits from under it for as long as they come. Requeued,
// it must make the next release hand the permit to it, and TryAcquire
// must refuse to barge meanwhile.
func TestScenarioStarvedLoserTurnsTheSemaphoreToHandOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 1, 1, atomicsem.WithBarging())
		held := mustTake(t, s, 1)
		w := park(t, s, t.Context(), 1)
		time.Sleep(2 * atomicsem.DefaultStarvationBound)

		st := stopWakeThenRequeue(t)
		held.Release() // wakes w to compete
		require.Equal(t, hook.AfterWake, st.waitStop())
		arrival := mustTake(t, s, 1) // and an arrival wins
		st.resume()
		require.Equal(t, hook.BeforePark, st.waitStop())
		require.Equal(t, "starving", atomicsem.QueueState(s), "the starved loser must turn the semaphore to hand-off")

		arrival.Release() // hands the permit to w
		_, ok := s.TryAcquire(1)
		require.False(t, ok, "an arrival barged past a waiter that waited past the bound")
		st.resume()
		synctest.Wait()
		requireGranted(t, w, 1)
		w.tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 1, Limit: 1, Max: 1}, s.Stats())
	})
}

// Bug shape: an arrival that saw the queue eligible without the lock, and
// then, under the lock, queues behind it without looking again. If the
// queue has emptied meanwhile and the permit come free, it queues with
// nobody ahead of it and no release to come, and waits for ever beside a
// free permit.
func TestScenarioArrivalLooksAgainUnderTheLockBeforeQueueing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 1, 1)
		held := mustTake(t, s, 1)
		w := park(t, s, t.Context(), 1)

		st := installStopper(t, func(site hook.Site) bool { return site == hook.BeforeQueue })
		arrival := goAcquire(t.Context(), s, 1)
		require.Equal(t, hook.BeforeQueue, st.waitStop())

		held.Release() // grants w; the queue empties
		synctest.Wait()
		requireGranted(t, w, 1)
		w.tok.Release() // the permit is free, nobody is queued
		require.Equal(t, "empty", atomicsem.QueueState(s))

		st.resume()
		synctest.Wait()
		require.True(t, arrival.returned(), "the arrival parked beside a free permit: %+v", s.Stats())
		requireGranted(t, arrival, 1)
		arrival.tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 1, Limit: 1, Max: 1}, s.Stats())
	})
}

// Bug shape (barging slower than FIFO on many cores): a release that meets
// parked waiters takes the queue lock and wakes one, even while a waiter it
// or another release woke has not yet run. With arrivals on many cores
// taking the permits first, each release then pays for the lock and a
// wake-up, and the waiters it wakes mostly lose and park again. While a
// woken waiter is on its way, releases must return their permits without
// the lock and wake nobody; the waiter, once it settles, hands the wake on.
func TestScenarioBargingReleasesLeaveTheLockAloneWhileAWakeIsOnItsWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 1, 1, atomicsem.WithBarging(), atomicsem.WithStarvationBound(time.Hour))
		held := mustTake(t, s, 1)
		waiters := []*pendingAcquire{
			park(t, s, t.Context(), 1), park(t, s, t.Context(), 1), park(t, s, t.Context(), 1),
		}
		var wakes, dispatches atomic.Int32
		st := installStopper(t, func(site hook.Site) bool {
			switch site {
			case hook.AfterWake:
				return wakes.Add(1) == 1 // the first waiter woken stops on its way
			case hook.BeforeDispatch:
				dispatches.Add(1)
			}
			return false
		})
		held.Release() // wakes the front waiter
		require.Equal(t, hook.AfterWake, st.waitStop())

		dispatches.Store(0)
		took := 0
		for range 100 {
			if tok, ok := s.TryAcquire(1); ok {
				took++
				tok.Release()
			}
		}
		synctest.Wait()
		require.Equal(t, 100, took, "arrivals barge while the woken waiter is on its way")
		require.Zero(t, dispatches.Load(), "releases went to the queue lock while a woken waiter was on its way")
		require.EqualValues(t, 1, wakes.Load(), "releases woke more waiters while one was on its way")
		require.Equal(t, "queued", atomicsem.QueueState(s), "a woken waiter is on its way: the word must not send releases to the lock")

		st.resume() // the woken waiter takes the free permit and re-arms the wake
		synctest.Wait()
		requireReturned(t, waiters, 0)
		requireGranted(t, waiters[0], 1)
		require.Equal(t, "eligible", atomicsem.QueueState(s))
		requireQueueFlags(t, s)
		for i := 1; i < len(waiters); i++ {
			waiters[i-1].tok.Release() // wakes the next waiter, which takes the permit
			synctest.Wait()
			requireGranted(t, waiters[i], 1)
		}
		waiters[len(waiters)-1].tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 1, Limit: 1, Max: 1}, s.Stats())
		requireQueueFlags(t, s)
	})
}

// Bug shape: a barging release returns its permit by CAS, and an arrival
// takes it before the release has the queue lock. If the release then
// wakes only as many waiters as are free by now, it wakes nobody and
// leaves the word eligible, and with arrivals always quicker than the
// lock every release pays for it and wakes nobody. The release must wake
// the front waiter for the permit it returned; the waiter, finding it
// gone, goes back to its place, and the next release wakes it again.
func TestScenarioBargingReleaseWakesForThePermitAnArrivalTook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 1, 1, atomicsem.WithBarging(), atomicsem.WithStarvationBound(time.Hour))
		held := mustTake(t, s, 1)
		front := park(t, s, t.Context(), 1)
		behind := park(t, s, t.Context(), 1)
		waiters := []*pendingAcquire{front, behind}

		var dispatches, wakes atomic.Int32
		st := installStopper(t, func(site hook.Site) bool {
			switch site {
			case hook.BeforeDispatch:
				return dispatches.Add(1) == 1 // the release, between its CAS and the lock
			case hook.AfterWake:
				wakes.Add(1)
			}
			return false
		})
		released := goRelease(held)
		require.Equal(t, hook.BeforeDispatch, st.waitStop())
		arrival := mustTake(t, s, 1) // the permit is gone before the lock
		st.resume()
		<-released
		synctest.Wait()
		require.EqualValues(t, 1, wakes.Load(), "the release woke nobody for the permit it returned")
		requireReturned(t, waiters) // the front waiter lost and queued again, first
		require.Equal(t, "eligible", atomicsem.QueueState(s))
		requireQueueFlags(t, s)

		arrival.Release() // wakes the front waiter again, which now wins
		synctest.Wait()
		requireReturned(t, waiters, 0)
		requireGranted(t, front, 1)
		front.tok.Release()
		synctest.Wait()
		requireGranted(t, behind, 1)
		behind.tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 1, Limit: 1, Max: 1}, s.Stats())
	})
}

// Bug shape: in barging mode releases wake nobody while a woken waiter is
// on its way, so the permits they return meanwhile wait for that waiter.
// If it settles without serving the queue, a waiter that fits in the
// permits left free stays parked beside them until some later release,
// which may never come. Here the second holder releases while the first
// waiter is stopped on its way; once that waiter has taken one permit, it
// must wake the second waiter for the other.
func TestScenarioBargingSettledWaiterWakesTheNextForPermitsLeftFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, 2, 2, atomicsem.WithBarging(), atomicsem.WithStarvationBound(time.Hour))
		h1, h2 := mustTake(t, s, 1), mustTake(t, s, 1)
		first := park(t, s, t.Context(), 1)
		second := park(t, s, t.Context(), 1)

		var wakes atomic.Int32
		st := installStopper(t, func(site hook.Site) bool {
			return site == hook.AfterWake && wakes.Add(1) == 1
		})
		h1.Release() // wakes first, which stops on its way
		require.Equal(t, hook.AfterWake, st.waitStop())
		h2.Release() // returns its permit without the lock and wakes nobody
		synctest.Wait()
		requireReturned(t, []*pendingAcquire{first, second})

		st.resume()
		synctest.Wait()
		requireGranted(t, first, 1)
		requireGranted(t, second, 1, "a permit was left free beside a parked waiter: %+v", s.Stats())
		requireQueueFlags(t, s)
		first.tok.Release()
		second.tok.Release()
		require.Equal(t, atomicsem.Stats{Available: 2, Limit: 2, Max: 2}, s.Stats())
	})
}
