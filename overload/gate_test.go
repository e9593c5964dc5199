package overload_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/overload"
)

var bg = context.Background()

func TestFreePermitsAreTakenWithoutWaiting(t *testing.T) {
	g := overload.MustNew(3, 3, classes(0, 0))
	a := take(t, g, 0, 2)
	b := take(t, g, 1, 1)
	_, ok := g.TryAcquire(0, 1)
	require.False(t, ok, "the limit is full")
	require.Equal(t, []int64{2, 1}, heldBy(g))
	a.Release()
	b.Release()
	require.Equal(t, int64(0), g.Held())
}

func TestWaitersAreServedByPriorityThenInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(1, 1, classes(0, 0, 0))
		held := take(t, g, 2, 1)
		low1 := start(t, bg, g, 2, 1)
		mid1 := start(t, bg, g, 1, 1)
		low2 := start(t, bg, g, 2, 1)
		high := start(t, bg, g, 0, 1)
		mid2 := start(t, bg, g, 1, 1)
		for _, next := range []*pending{high, mid1, mid2, low1, low2} {
			held.Release()
			held = next.granted(t)
		}
		held.Release()
	})
}

func TestArrivalsOfAHigherClassPassLowerWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(3, 3, classes(0, 0))
		big := take(t, g, 1, 2)
		low := start(t, bg, g, 1, 2) // needs 2, 1 free
		low.waits(t)
		_, ok := g.TryAcquire(1, 1)
		require.False(t, ok, "a class-1 arrival must not pass the class-1 waiter")
		// A class-0 arrival takes the free permit without waiting behind
		// the class-1 waiter: priority.
		high := take(t, g, 0, 1)
		big.Release()
		low.granted(t).Release()
		high.Release()
	})
}

func TestAnOwedReserveIsServedBeforeHigherClassesBorrow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// c0 has no share; c1 is guaranteed half of the limit of 4.
		g := overload.MustNew(4, 4, classes(0, 0.5))
		hi := take(t, g, 0, 4) // c0 borrows all of it, c1's reserve included
		lo := start(t, bg, g, 1, 1)
		lo.waits(t)
		hi2 := start(t, bg, g, 0, 1)
		hi2.waits(t)
		// The permit c0 gives back goes to c1, which is owed its reserve,
		// not to the higher class's waiter.
		rest, ok := hi.Split(3)
		require.True(t, ok)
		hi.Release()
		lo1 := lo.granted(t)
		hi2.waits(t)
		// c1 is owed a second permit: its next arrival gets the next one
		// back, ahead of c0's waiter.
		lo2 := start(t, bg, g, 1, 1)
		lo2.waits(t)
		one, ok := rest.Split(1)
		require.True(t, ok)
		one.Release()
		tok2 := lo2.granted(t)
		hi2.waits(t)
		require.Equal(t, []int64{2, 2}, heldBy(g))
		// c1 holds its reserve: a third c1 request would borrow, and waits.
		lo3 := start(t, bg, g, 1, 1)
		lo3.waits(t)
		// Once c1 gives one back it is under its reserve again, so its
		// waiter is owed the permit, still ahead of c0's.
		tok2.Release()
		tok3 := lo3.granted(t)
		hi2.waits(t)
		rest.Release()
		hi2.granted(t).Release()
		tok3.Release()
		lo1.Release()
		require.Equal(t, int64(0), g.Held())
	})
}

func TestAClassNeverBorrowsPastItsCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(4, 4, []overload.Class{
			{Name: "batch", MaxShare: 0.5},
			{Name: "rest"},
		})
		a := take(t, g, 0, 2)
		_, ok := g.TryAcquire(0, 1)
		require.False(t, ok, "batch is at its ceiling of 2 with 2 free")
		capped := start(t, bg, g, 0, 1)
		capped.waits(t)
		// A waiter at its class's ceiling holds back nobody below: only
		// its own class's releases can serve it.
		b := take(t, g, 1, 2)
		require.Equal(t, []int64{2, 2}, heldBy(g))
		b.Release()
		capped.waits(t)
		a.Release()
		capped.granted(t).Release()
	})
}

func TestAWaiterThatDoesNotFitHoldsBackTheClassesBelow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(4, 4, classes(0, 0))
		a := take(t, g, 1, 2)
		b := take(t, g, 1, 2)
		big := start(t, bg, g, 0, 3) // 3 of class 0: waits for 3 free
		small := start(t, bg, g, 1, 1)
		a.Release() // 2 free: not enough for big, and small must not pass it
		big.waits(t)
		small.waits(t)
		_, ok := g.TryAcquire(1, 1)
		require.False(t, ok)
		b.Release()
		big.granted(t).Release()
		small.granted(t).Release()
	})
}

func TestARequestAboveTheLimitHoldsBackNobody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(2, 4, classes(0, 0))
		huge := start(t, bg, g, 0, 3) // above the limit of 2, within the maximum
		huge.waits(t)
		tok := take(t, g, 1, 2)
		tok.Release()
		require.NoError(t, g.SetLimit(3))
		huge.granted(t).Release()
	})
}

func TestStarvationBoundServesALowerClassOncePerBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			bound = 100 * time.Millisecond
			hold  = 10 * time.Millisecond
		)
		g := overload.MustNew(2, 2, classes(0, 0), overload.WithStarvationBound(bound))
		// Three critical workers keep the limit of 2 full, each holding
		// its permit for hold and asking again at once.
		defer workers(g, 0, 3, hold)()
		time.Sleep(hold + hold/7) // off every instant a worker releases at
		sheddable := start(t, bg, g, 1, 1)
		time.Sleep(bound - time.Millisecond)
		sheddable.waits(t)
		// Served within the bound plus one hold: at the first release
		// after the bound.
		time.Sleep(hold + time.Millisecond)
		sheddable.granted(t).Release()
		// A stream of sheddable waiters gets one grant per bound, no more.
		var grants []time.Duration
		from := time.Now()
		for range 3 {
			p := start(t, bg, g, 1, 1)
			for !p.finished() {
				time.Sleep(time.Millisecond)
			}
			p.granted(t).Release()
			grants = append(grants, time.Since(from))
		}
		for i := 1; i < len(grants); i++ {
			require.GreaterOrEqual(t, grants[i]-grants[i-1], bound-hold, "grants %v", grants)
		}
	})
}

func TestWithoutAStarvationBoundPriorityIsStrict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(1, 1, classes(0, 0), overload.WithStarvationBound(0))
		defer workers(g, 0, 2, time.Millisecond)()
		synctest.Wait() // the workers hold the permit and wait for it
		lowCtx, lowStop := context.WithTimeout(bg, time.Minute)
		defer lowStop()
		low := start(t, lowCtx, g, 1, 1)
		time.Sleep(time.Minute + time.Millisecond)
		low.refused(t, context.DeadlineExceeded)
	})
}

func TestBoundedQueueRefusesOrPushesOutALowerClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(1, 1, classes(0, 0, 0), overload.WithMaxQueue(2))
		tok := take(t, g, 0, 1)
		a := start(t, bg, g, 2, 1)
		b := start(t, bg, g, 2, 1)
		// Full: a class-2 arrival is refused at once...
		start(t, bg, g, 2, 1).refused(t, overload.ErrQueueFull)
		// ...and a class-1 arrival pushes out class 2's last waiter.
		c := start(t, bg, g, 1, 1)
		b.refused(t, overload.ErrQueueFull)
		a.waits(t)
		c.waits(t)
		st := g.Stats()
		require.Equal(t, uint64(2), st.Classes[2].QueueFull)
		tok.Release()
		c.granted(t).Release()
		a.granted(t).Release()
	})
}

func TestMaxWaitEndsTheWaitAtTheShorterOfItAndTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(1, 1, classes(0), overload.WithMaxWait(50*time.Millisecond))
		tok := take(t, g, 0, 1)
		begin := time.Now()
		p := start(t, bg, g, 0, 1)
		time.Sleep(50*time.Millisecond - time.Nanosecond)
		p.waits(t)
		time.Sleep(time.Nanosecond)
		p.refused(t, overload.ErrMaxWait)
		require.Equal(t, 50*time.Millisecond, time.Since(begin))

		ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
		defer cancel()
		q := start(t, ctx, g, 0, 1)
		time.Sleep(20 * time.Millisecond)
		q.refused(t, context.DeadlineExceeded)
		require.Equal(t, uint64(1), g.Stats().Classes[0].MaxWait)
		tok.Release()
	})
}

func TestOverloadModeServesNewestFirstAndDropsTheOldest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const target, interval = 5 * time.Millisecond, 100 * time.Millisecond
		g := overload.MustNew(1, 1, classes(0), overload.WithCoDel(target, interval))
		tok := take(t, g, 0, 1)
		// Waiters arrive every millisecond; nothing is served for the
		// whole interval, so the queue's delay stays above the target.
		var ws []*pending
		for range 110 {
			ws = append(ws, start(t, bg, g, 0, 1))
			time.Sleep(time.Millisecond)
		}
		// The arrival at 106 ms saw the delay above the target for the
		// whole interval (since 6 ms): overloaded. Every arrival since
		// dropped the waiters older than twice the target; the last, at
		// 109 ms, those that arrived before 99 ms.
		st := g.Stats()
		require.True(t, st.Classes[0].Overloaded)
		for i, w := range ws {
			if i < 99 {
				w.refused(t, overload.ErrDropped)
			} else {
				w.waits(t)
			}
		}
		require.Equal(t, uint64(99), g.Stats().Classes[0].Dropped)
		// Newest first, until the queue drains. The first release comes
		// at 110 ms, when the waiter of 99 ms has waited more than twice
		// the target: it is dropped then.
		next := tok
		for i := len(ws) - 1; i >= 100; i-- {
			next.Release()
			next = ws[i].granted(t)
		}
		ws[99].refused(t, overload.ErrDropped)
		// The queue is empty for the moment, but the mode ends only once
		// the delay has stayed at or below the target for an interval.
		require.True(t, g.Stats().Classes[0].Overloaded, "a momentary drain does not end the mode")
		// The last grant left the queue empty at 110 ms. An interval later
		// the next arrival that queues finds it still short: the mode ends
		// (Stats shows the mode as the last look at the queue left it).
		time.Sleep(interval)
		b := start(t, bg, g, 0, 1)
		require.False(t, g.Stats().Classes[0].Overloaded, "short for an interval")
		// Back to arrival order.
		c := start(t, bg, g, 0, 1)
		next.Release()
		next = b.granted(t)
		c.waits(t)
		next.Release()
		c.granted(t).Release()
	})
}

// TestOverloadModeShedsTheClassesBelow checks that while a class is in the
// overload mode the classes below it are shed, waiters and arrivals alike,
// even when a permit is free for the moment, except a class that holds
// less than its reserve.
func TestOverloadModeShedsTheClassesBelow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const target, interval = 5 * time.Millisecond, 100 * time.Millisecond
		g := overload.MustNew(2, 2, []overload.Class{{Name: "critical"}, {Name: "batch"}, {Name: "guaranteed", Share: 0.5}},
			overload.WithCoDel(target, interval))
		tok := take(t, g, 0, 2)
		batch := start(t, bg, g, 1, 1)
		// Critical requests queue for longer than the interval.
		var crit []*pending
		for range 110 {
			crit = append(crit, start(t, bg, g, 0, 1))
			time.Sleep(time.Millisecond)
		}
		require.True(t, g.Stats().Classes[0].Overloaded)
		batch.refused(t, overload.ErrDropped)
		// A batch arrival is refused at once; a request of a class that
		// holds less than its reserve (1 of 2) is not shed, and is owed
		// the next permit back.
		start(t, bg, g, 1, 1).refused(t, overload.ErrDropped)
		_, ok := g.TryAcquire(1, 1)
		require.False(t, ok)
		owed := start(t, bg, g, 2, 1)
		owed.waits(t)
		one, ok := tok.Split(1)
		require.True(t, ok)
		one.Release()
		owed.granted(t).Release()
		// The free permit goes to the newest critical waiter, not batch.
		newest := crit[len(crit)-1].granted(t)
		require.Equal(t, uint64(2), g.Stats().Classes[1].Dropped)
		newest.Release()
		tok.Release()
		g.Close()
		for _, p := range crit[:len(crit)-1] {
			if p.finished() && p.err == nil {
				p.tok.Release()
			}
		}
	})
}

// TestClassesBelowStayShedUntilTheQueueStaysEmptyForTheHold checks that
// the shedding a class in the overload mode starts lasts until its queue
// has stayed empty for the shed hold, four intervals: a lower request
// arriving after a lull of one interval, with a permit free, is still
// shed, and one after the hold is admitted.
func TestClassesBelowStayShedUntilTheQueueStaysEmptyForTheHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const target, interval = 5 * time.Millisecond, 100 * time.Millisecond
		g := overload.MustNew(1, 1, classes(0, 0), overload.WithCoDel(target, interval))
		tok := take(t, g, 0, 1)
		// Critical requests queue for longer than the interval: the
		// overload mode, which drops all but the newest few.
		var crit []*pending
		for range 110 {
			crit = append(crit, start(t, bg, g, 0, 1))
			time.Sleep(time.Millisecond)
		}
		require.True(t, g.Stats().Classes[0].Overloaded)
		// Drain the queue, newest first; the last grant leaves it empty.
		next := tok
		for i := len(crit) - 1; i >= 0; i-- {
			if crit[i].finished() {
				continue
			}
			next.Release()
			next = crit[i].granted(t)
		}
		next.Release()
		require.Zero(t, g.Stats().Waiters)
		// The queue has stayed empty for an interval and a half, with the
		// permit free: the classes below are still shed.
		time.Sleep(3 * interval / 2)
		start(t, bg, g, 1, 1).refused(t, overload.ErrDropped)
		_, ok := g.TryAcquire(1, 1)
		require.False(t, ok, "a lower class takes a permit within the hold")
		// Once the queue has stayed empty for the hold, they are let in.
		time.Sleep(shedHoldIntervals*interval - 3*interval/2)
		start(t, bg, g, 1, 1).granted(t).Release()
		lower, ok := g.TryAcquire(1, 1)
		require.True(t, ok, "the lower class's block bit outlived the hold")
		lower.Release()
	})
}

func TestADeadlineBeforeTheExpectedWaitIsRefusedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(1, 1, classes(0))
		tok := take(t, g, 0, 1)
		// Teach the gate its pace: a grant from the queue every 10 ms.
		ws := []*pending{start(t, bg, g, 0, 1), start(t, bg, g, 0, 1), start(t, bg, g, 0, 1)}
		for _, w := range ws {
			time.Sleep(10 * time.Millisecond)
			tok.Release()
			tok = w.granted(t)
		}
		// Two wait; an arrival behind them expects about 3 grants' time.
		a, b := start(t, bg, g, 0, 1), start(t, bg, g, 0, 1)
		ctx, cancel := context.WithTimeout(bg, 5*time.Millisecond)
		defer cancel()
		begin := time.Now()
		p := start(t, ctx, g, 0, 1)
		p.refused(t, overload.ErrDeadline)
		require.Zero(t, time.Since(begin), "refused without waiting")
		require.True(t, errors.Is(p.err, overload.ErrShed))
		// A deadline far enough away waits.
		ctx2, cancel2 := context.WithTimeout(bg, time.Second)
		defer cancel2()
		q := start(t, ctx2, g, 0, 1)
		q.waits(t)
		for _, w := range []*pending{a, b, q} {
			tok.Release()
			tok = w.granted(t)
		}
		tok.Release()
	})
}

func TestSetLimitServesWaitersAndLoweringRevokesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(2, 8, classes(0.5, 0))
		a, b := take(t, g, 1, 1), take(t, g, 1, 1)
		w := start(t, bg, g, 0, 2)
		require.NoError(t, g.SetLimit(4))
		w2 := w.granted(t)
		// Lowered below what is held: a debt, nobody admitted.
		require.NoError(t, g.SetLimit(2))
		st := g.Stats()
		require.Equal(t, int64(4), st.Held)
		require.Equal(t, int64(2), st.Limit)
		require.Equal(t, int64(1), st.Classes[0].Reserve)
		_, ok := g.TryAcquire(0, 1)
		require.False(t, ok)
		p := start(t, bg, g, 0, 1)
		a.Release()
		b.Release()
		p.waits(t) // 2 held, limit 2
		w2.Release()
		p.granted(t).Release()
	})
}

func TestCloseRefusesWaitersAndLaterCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(1, 1, classes(0, 0))
		tok := take(t, g, 0, 1)
		p := start(t, bg, g, 1, 1)
		g.Close()
		p.refused(t, overload.ErrClosed)
		_, err := g.Acquire(bg, 0, 1)
		require.ErrorIs(t, err, overload.ErrClosed)
		_, ok := g.TryAcquire(0, 0)
		require.False(t, ok)
		require.ErrorIs(t, g.SetLimit(1), overload.ErrClosed)
		tok.Release() // tokens out may still be released
		require.Equal(t, int64(0), g.Held())
		g.Close()
	})
}

func TestCancelledWaiterLetsThoseItHeldBackIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(2, 2, classes(0, 0))
		a := take(t, g, 1, 1)
		ctx, cancel := context.WithCancel(bg)
		big := start(t, ctx, g, 0, 2)
		small := start(t, bg, g, 1, 1)
		small.waits(t)
		cancel()
		big.refused(t, context.Canceled)
		small.granted(t).Release()
		a.Release()
	})
}

func TestShedErrorsMatchErrShed(t *testing.T) {
	for _, err := range []error{overload.ErrQueueFull, overload.ErrMaxWait, overload.ErrDropped, overload.ErrDeadline} {
		require.ErrorIs(t, err, overload.ErrShed, "%v", err)
		require.Contains(t, err.Error(), "overload: ")
	}
	require.NotErrorIs(t, overload.ErrClosed, overload.ErrShed)
	require.NotErrorIs(t, overload.ErrQueueFull, overload.ErrMaxWait)
}

// TestADoneContextWinsOverAGrant checks atomicsem's rule for the gate: a
// waiter whose context is done when it finds its permits granted returns
// the context's error and passes the permits on. With one P the waiter,
// woken by the grant, cannot run before the test cancels its context.
func TestADoneContextWinsOverAGrant(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(1, 1, classes(0))
		for range 8 {
			tok := take(t, g, 0, 1)
			ctx, cancel := context.WithCancel(bg)
			p := start(t, ctx, g, 0, 1)
			next := start(t, bg, g, 0, 1)
			tok.Release() // grants p, which wakes with its permits
			cancel()      // before it runs
			p.refused(t, context.Canceled)
			next.granted(t).Release() // the permits went on
			require.Equal(t, int64(0), g.Held())
		}
	})
}
