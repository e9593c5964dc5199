package adaptive_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
)

// ended is one call of an observer.
type ended struct {
	o   adaptive.Outcome
	rtt time.Duration
}

// TestObserveSeesEveryEnd registers an observer and ends permits in each
// of the three ways, in fake time: the observer sees each outcome with its
// exact RTT, until it is stopped.
func TestObserveSeesEveryEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newLimiter(t, &recorder{}, 1, 10, 4)
		var seen []ended
		stop, err := lim.Observe(func(o adaptive.Outcome, rtt time.Duration) { seen = append(seen, ended{o, rtt}) })
		require.NoError(t, err)
		var a, b, c adaptive.Permit
		require.True(t, lim.TryAcquire(&a))
		require.True(t, lim.TryAcquire(&b))
		require.True(t, lim.TryAcquire(&c))
		time.Sleep(10 * time.Millisecond)
		a.Succeeded()
		time.Sleep(10 * time.Millisecond)
		b.Dropped()
		time.Sleep(10 * time.Millisecond)
		c.Ignored()
		require.Equal(t, []ended{{adaptive.Succeeded, 10 * time.Millisecond}, {adaptive.Dropped, 20 * time.Millisecond},
			{adaptive.Ignored, 30 * time.Millisecond}}, seen)

		stop()
		stop() // does nothing
		require.True(t, lim.TryAcquire(&a))
		a.Succeeded()
		require.Len(t, seen, 3, "an observer stopped still sees ends")

		_, err = lim.Observe(func(adaptive.Outcome, time.Duration) {})
		require.NoError(t, err, "a stopped observer's place is free")
	})
}

// TestObserveRefusesASecondObserver: while one observer is registered,
// Observe returns ErrObserved and registers nothing; the first one's stop,
// once called, does not remove a later observer.
func TestObserveRefusesASecondObserver(t *testing.T) {
	lim := newLimiter(t, &recorder{}, 1, 10, 4)
	first, second := 0, 0
	stop, err := lim.Observe(func(adaptive.Outcome, time.Duration) { first++ })
	require.NoError(t, err)
	again, err := lim.Observe(func(adaptive.Outcome, time.Duration) { second++ })
	require.ErrorIs(t, err, adaptive.ErrObserved)
	require.Nil(t, again)
	var p adaptive.Permit
	require.True(t, lim.TryAcquire(&p))
	p.Succeeded()
	require.Equal(t, [2]int{1, 0}, [2]int{first, second})

	stop()
	stop2, err := lim.Observe(func(adaptive.Outcome, time.Duration) { second++ })
	require.NoError(t, err)
	defer stop2()
	stop() // the first observer's stop again: the second stays
	require.True(t, lim.TryAcquire(&p))
	p.Dropped()
	require.Equal(t, [2]int{1, 1}, [2]int{first, second})

	require.Panics(t, func() { _, _ = lim.Observe(nil) })
}

// TestObserverPanicFreesTheSlot: an observer that panics, at a limit of
// 1, leaves the slot free and the outcome counted, and the panic reaches
// the goroutine that ended the permit.
func TestObserverPanicFreesTheSlot(t *testing.T) {
	for _, o := range []adaptive.Outcome{adaptive.Succeeded, adaptive.Dropped, adaptive.Ignored} {
		t.Run(o.String(), func(t *testing.T) {
			lim := newLimiter(t, &recorder{}, 1, 1, 1)
			_, err := lim.Observe(func(adaptive.Outcome, time.Duration) { panic(errUser) })
			require.NoError(t, err)
			var p adaptive.Permit
			require.True(t, lim.TryAcquire(&p))
			requirePanics(t, errUser, func() { p.End(o) })
			st := lim.Stats()
			require.Equal(t, uint64(1), st.Succeeded+st.Dropped+st.Ignored)
			require.Equal(t, int64(0), st.InFlight)
		})
	}
}
