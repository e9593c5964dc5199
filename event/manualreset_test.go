package event_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/event"
)

func TestManualResetZeroValueIsUnset(t *testing.T) {
	var e event.ManualReset
	require.False(t, e.IsSet())
	require.False(t, isClosed(e.Done()))
	e.Set()
	require.True(t, e.IsSet())
	require.NoError(t, e.Wait(context.Background()))
}

func TestManualResetSetReleasesAllCurrentAndFutureWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e event.ManualReset
		released := startWaiters(t, &e, 3)
		done := e.Done()
		go func() {
			<-done
			released.Add(1)
		}()
		synctest.Wait()
		require.Zero(t, released.Load(), "no waiter may return before Set")

		e.Set()
		synctest.Wait()
		require.Equal(t, int64(4), released.Load(), "Set must release every waiter")

		// Until Reset, later waiters pass straight through.
		require.True(t, e.IsSet())
		start := time.Now()
		require.NoError(t, e.Wait(context.Background()))
		require.Zero(t, time.Since(start))
		require.True(t, isClosed(e.Done()))
		e.Set() // setting a set event does nothing (in particular, no double close)
		require.True(t, e.IsSet())
	})
}

func TestManualResetResetBlocksLaterWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e event.ManualReset
		e.Set()
		before := e.Done()
		e.Reset()
		require.False(t, e.IsSet())
		require.True(t, isClosed(before), "a channel handed out before Reset must stay closed")
		require.False(t, isClosed(e.Done()), "Done after Reset must be a fresh, open channel")

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		require.ErrorIs(t, e.Wait(ctx), context.DeadlineExceeded, "Wait after Reset must block")

		e.Reset() // resetting a clear event does nothing
		require.False(t, e.IsSet())

		errc := goWait(context.Background(), &e)
		synctest.Wait()
		e.Set()
		require.NoError(t, <-errc, "the next Set must release a waiter parked after Reset")
	})
}

func TestManualResetWaitWithDoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var e event.ManualReset
	require.Equal(t, context.Canceled, e.Wait(ctx), "ctx.Err() must come back unwrapped")
	e.Set()
	// Repeated, because a Wait that merely selected between the two
	// channels would get this right half of the time.
	for range 100 {
		require.Equal(t, context.Canceled, e.Wait(ctx), "a done ctx must fail even when the event is set")
	}
	require.True(t, e.IsSet(), "a failed Wait must not change the event")
}

func TestManualResetCancelledParkedWaitReturnsCtxErr(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e event.ManualReset
		ctx, cancel := context.WithCancel(context.Background())
		errc := goWait(ctx, &e)
		synctest.Wait()
		cancel()
		require.Equal(t, context.Canceled, <-errc)
		require.False(t, e.IsSet())
	})
}

// TestManualResetCrossesBubbles sets and resets an event inside a
// testing/synctest bubble and waits on it outside, and the reverse: the
// channel a waiter blocks on must be made where the waiter runs, not by the
// Set or Reset (see TestAutoResetCrossesBubbles).
func TestManualResetCrossesBubbles(t *testing.T) {
	ctx := context.Background()
	t.Run("set inside, wait outside", func(t *testing.T) {
		var e event.ManualReset
		synctest.Test(t, func(t *testing.T) { e.Set() })
		require.NoError(t, e.Wait(ctx))
		<-e.Done()
	})
	t.Run("reset inside, wait outside", func(t *testing.T) {
		var e event.ManualReset
		e.Set()
		synctest.Test(t, func(t *testing.T) { e.Reset() })
		go e.Set()
		require.NoError(t, e.Wait(ctx))
	})
	t.Run("set outside, wait inside", func(t *testing.T) {
		var e event.ManualReset
		e.Set()
		synctest.Test(t, func(t *testing.T) { require.NoError(t, e.Wait(ctx)) })
	})
}
