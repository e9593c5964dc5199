package overload_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/overload"
)

func TestIdleWhileNothingIsHeldOrAwaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(1, 2, classes(0.5, 0))
		require.True(t, g.Idle(), "a new gate")
		tok := take(t, g, 1, 1)
		require.False(t, g.Idle(), "a permit held")
		p := start(t, bg, g, 0, 1)
		require.False(t, g.Idle(), "a waiter")
		tok.Release()
		p.granted(t).Release()
		require.True(t, g.Idle(), "everything back")
		require.NoError(t, g.SetLimit(2))
		require.True(t, g.Idle(), "at another limit: a new gate at that limit")
		g.Close()
		require.False(t, g.Idle(), "closed")
	})
}

// TestTheEstimateOfTheWaitIsForgottenAfterEstimateMemory shows the one
// time-kept state besides the overload mode's: a gate that has learnt its
// pace refuses a short deadline at once, so it is not idle until it has
// forgotten the pace, and then it answers as a new gate does.
func TestTheEstimateOfTheWaitIsForgottenAfterEstimateMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(1, 1, classes(0))
		learn := func() {
			tok := take(t, g, 0, 1)
			ws := []*pending{start(t, bg, g, 0, 1), start(t, bg, g, 0, 1), start(t, bg, g, 0, 1)}
			for _, w := range ws {
				time.Sleep(10 * time.Millisecond)
				tok.Release()
				tok = w.granted(t)
			}
			tok.Release()
		}
		// short is an Acquire with a deadline of 1 ms behind a held permit;
		// the pace learnt is a grant every 2.3 ms or so.
		short := func() *pending {
			tok := take(t, g, 0, 1)
			t.Cleanup(tok.Release)
			ctx, cancel := context.WithTimeout(bg, time.Millisecond)
			t.Cleanup(cancel)
			return start(t, ctx, g, 0, 1)
		}

		learn()
		require.False(t, g.Idle(), "the estimate is kept")
		p := short()
		p.refused(t, overload.ErrDeadline)

		g = overload.MustNew(1, 1, classes(0))
		learn()
		time.Sleep(overload.EstimateMemory - time.Nanosecond)
		require.False(t, g.Idle(), "just before EstimateMemory")
		time.Sleep(time.Nanosecond)
		require.True(t, g.Idle(), "at EstimateMemory")
		p = short() // a new gate lets it wait, and so does this one
		require.False(t, p.finished(), "waits, as at a new gate")
		time.Sleep(time.Millisecond)
		p.refused(t, context.DeadlineExceeded)
	})
}

// TestIdleWaitsForTheOverloadModeToEnd checks that a gate whose class has
// been in the overload mode is not idle until the mode and its shedding
// have ended by the clock, and that it then sheds nobody, as a new gate.
func TestIdleWaitsForTheOverloadModeToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const target, interval = time.Millisecond, 10 * time.Millisecond
		g := overload.MustNew(1, 1, classes(0, 0), overload.WithCoDel(target, interval))
		// A standing queue of class 0 for more than an interval.
		tok := take(t, g, 0, 1)
		var ws []*pending
		for range 4 {
			ws = append(ws, start(t, bg, g, 0, 1))
			time.Sleep(4 * time.Millisecond)
		}
		tok.Release()
		require.True(t, g.Stats().Classes[0].Overloaded, "class 0 is in the overload mode")
		require.False(t, g.Idle(), "in the overload mode")
		for _, w := range ws {
			if w.finished() && w.err == nil {
				w.tok.Release()
			}
		}
		require.Zero(t, g.Stats().Held)
		require.Zero(t, g.Stats().Waiters)
		require.False(t, g.Idle(), "the queue has not yet stayed short for an interval")
		time.Sleep(interval)
		require.False(t, g.Idle(), "the mode has ended, but the classes below are shed for the hold")
		time.Sleep(3 * interval) // the shed hold is four intervals (see Gate)
		require.True(t, g.Idle(), "the mode and its shedding have run out")
		// As at a new gate, a class-1 request is admitted, not shed, even
		// by TryAcquire, which never takes the lock.
		got, ok := g.TryAcquire(1, 1)
		require.True(t, ok, "TryAcquire of class 1 after Idle")
		got.Release()
	})
}
