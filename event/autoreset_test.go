package event_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/event"
)

func TestAutoResetZeroValueIsUnsetAndUsable(t *testing.T) {
	var e event.AutoReset
	require.False(t, e.TryWait(), "the zero value must start unset")
	require.NotNil(t, e.C())
	require.Equal(t, e.C(), e.C(), "C must return the same channel every time")
	e.Set()
	require.NoError(t, e.Wait(context.Background()))
	require.False(t, e.TryWait())
}

// TestAutoResetFirstUseFromManyGoroutinesSharesOneChannel guards the lazy
// creation of the channel: two goroutines that each made their own would
// never see each other's signals.
func TestAutoResetFirstUseFromManyGoroutinesSharesOneChannel(t *testing.T) {
	const goroutines = 8
	for range 200 {
		var e event.AutoReset
		chans := make([]<-chan struct{}, goroutines)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i := range chans {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				chans[i] = e.C()
			}()
		}
		start.Done()
		wg.Wait()
		for _, c := range chans {
			require.Equal(t, chans[0], c)
		}
	}
}

func TestAutoResetSetWakesExactlyOneWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e event.AutoReset
		woken := startWaiters(t, &e, 3)
		synctest.Wait()
		require.Zero(t, woken.Load(), "no waiter may return before a Set")

		for want := int64(1); want <= 3; want++ {
			e.Set()
			synctest.Wait()
			require.Equal(t, want, woken.Load(), "each Set must release exactly one waiter")
		}
		require.False(t, e.TryWait(), "a Set consumed by a waiter must not stay pending")
	})
}

func TestAutoResetSetWithoutWaiterStaysSetForNextWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e event.AutoReset
		e.Set()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		require.NoError(t, e.Wait(ctx), "a pending signal must release the next Wait")
		require.Zero(t, time.Since(start), "Wait must not block on a pending signal")

		e.Set()
		require.True(t, e.TryWait(), "a pending signal must satisfy TryWait")
		require.False(t, e.TryWait(), "TryWait must consume the signal")
	})
}

func TestAutoResetSetsSaturate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e event.AutoReset
		e.Set()
		e.Set() // nobody waits: this one must be absorbed, not counted
		woken := startWaiters(t, &e, 2)
		synctest.Wait()
		require.Equal(t, int64(1), woken.Load(), "two Sets with nobody waiting must release one waiter")

		e.Set() // release the other, so no goroutine is left behind
		synctest.Wait()
		require.Equal(t, int64(2), woken.Load())
	})
}

func TestAutoResetResetDiscardsPendingSignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e event.AutoReset
		e.Set()
		e.Reset()
		require.False(t, e.TryWait())

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		require.ErrorIs(t, e.Wait(ctx), context.DeadlineExceeded, "Wait after Reset must block")

		e.Reset() // resetting a clear event does nothing
		e.Set()
		require.True(t, e.TryWait())
	})
}

func TestAutoResetNoSpuriousWakeup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e event.AutoReset
		woken := startWaiters(t, &e, 2)
		time.Sleep(time.Hour) // fake time: every goroutine is blocked throughout
		synctest.Wait()
		require.Zero(t, woken.Load(), "a waiter returned without a Set")

		for want := int64(1); want <= 2; want++ {
			e.Set()
			synctest.Wait()
			require.Equal(t, want, woken.Load())
		}
	})
}

func TestAutoResetWaitWithDoneContextConsumesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var e event.AutoReset
	require.Equal(t, context.Canceled, e.Wait(ctx), "ctx.Err() must come back unwrapped")

	// Repeated, because a Wait that merely selected between the signal and
	// ctx would get this right half of the time.
	for range 100 {
		e.Set()
		require.Equal(t, context.Canceled, e.Wait(ctx), "a done ctx must fail even when the event is set")
		require.True(t, e.TryWait(), "a failed Wait must leave the signal pending")
	}
}

func TestAutoResetCancelledParkedWaitReturnsCtxErr(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e event.AutoReset
		ctx, cancel := context.WithCancel(context.Background())
		errc := goWait(ctx, &e)
		synctest.Wait()
		cancel()
		require.Equal(t, context.Canceled, <-errc)

		e.Set()
		require.True(t, e.TryWait(), "the cancelled waiter must not take a later signal")
	})
}

// TestAutoResetSetRacingCancelIsNeitherLostNorDoubled races a Set against
// the cancellation of the only waiter: either the waiter took the signal
// (Wait returned nil and the event is clear) or it did not (Wait returned
// ctx.Err() and the signal is still pending). Anything else loses or
// duplicates a wake-up.
func TestAutoResetSetRacingCancelIsNeitherLostNorDoubled(t *testing.T) {
	const rounds = 2000
	var took, missed int
	for range rounds {
		var e event.AutoReset
		ctx, cancel := context.WithCancel(context.Background())
		errc := goWait(ctx, &e)
		done := make(chan struct{})
		go func() {
			cancel()
			close(done)
		}()
		e.Set()
		<-done
		err := <-errc
		pending := e.TryWait()
		switch err {
		case nil:
			took++
			require.False(t, pending, "the signal was consumed by Wait and is still pending")
		case context.Canceled:
			missed++
			require.True(t, pending, "Wait failed and the signal is gone")
		default:
			t.Fatalf("Wait: %v", err)
		}
	}
	t.Logf("waiter took the signal %d times, was cancelled first %d times", took, missed)
}

func TestAutoResetComposesWithSelect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e event.AutoReset
		other := make(chan int, 1)
		pick := func() string {
			select {
			case <-e.C():
				return "event"
			case <-other:
				return "other"
			case <-time.After(time.Minute):
				return "timeout"
			}
		}

		require.Equal(t, "timeout", pick(), "an unset event must not be selectable")
		e.Set()
		require.Equal(t, "event", pick())
		require.False(t, e.TryWait(), "a receive from C must consume the signal")
		other <- 1
		require.Equal(t, "other", pick())

		got := make(chan string, 1)
		go func() { got <- pick() }()
		synctest.Wait()
		e.Set()
		require.Equal(t, "event", <-got, "Set must wake a goroutine selecting on C")
	})
}

// TestAutoResetSetBeforeFirstWaitIsNeitherLostNorDoubled races a Set against
// the first wait of a fresh event, the moment its channel is made: the
// signal a Set leaves before the channel exists must move into it exactly
// once.
func TestAutoResetSetBeforeFirstWaitIsNeitherLostNorDoubled(t *testing.T) {
	for range 2000 {
		var e event.AutoReset
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); e.Set() }()
		go func() { defer wg.Done(); <-e.C() }()
		wg.Wait()
		require.False(t, e.TryWait(), "one Set released one wait and left the event clear")
	}
}

// TestAutoResetCrossesBubbles uses one event inside and outside a
// testing/synctest bubble. A Set that made the channel would make it in the
// setter's bubble, and a waiter elsewhere receiving from it is a fatal error
// of the runtime, which no recover catches; the channel is the first
// waiter's instead.
func TestAutoResetCrossesBubbles(t *testing.T) {
	ctx := context.Background()
	t.Run("set inside, wait outside", func(t *testing.T) {
		var e event.AutoReset
		synctest.Test(t, func(t *testing.T) {
			e.Set()
			e.Set()
		})
		require.NoError(t, e.Wait(ctx))
		require.False(t, e.TryWait())
		e.Set()
		require.True(t, e.TryWait())
	})
	t.Run("set outside, wait inside", func(t *testing.T) {
		var e event.AutoReset
		e.Set()
		synctest.Test(t, func(t *testing.T) {
			require.NoError(t, e.Wait(ctx))
			require.False(t, e.TryWait())
		})
	})
	t.Run("set and cleared inside, waited outside", func(t *testing.T) {
		var e event.AutoReset
		synctest.Test(t, func(t *testing.T) {
			e.Set()
			require.True(t, e.TryWait())
			e.Set()
			e.Reset()
		})
		e.Set()
		<-e.C()
	})
}
