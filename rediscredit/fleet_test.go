package rediscredit_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/credittest"
	"github.com/atomicsem/atomicsem/rediscredit"
)

// fleetDuration is how long the fleet tests run: $REDISCREDIT_FLEET (a Go
// duration), one second by default.
func fleetDuration(t *testing.T) time.Duration {
	s := os.Getenv("REDISCREDIT_FLEET")
	if s == "" {
		return time.Second
	}
	d, err := time.ParseDuration(s)
	require.NoError(t, err, "REDISCREDIT_FLEET")
	return d
}

// Eight clients, each with its own connections, share one key: four spin
// on TrySpend and four Spend. In every window [a, b] of the server's clock
// the credit spent is at most burst + ⌊rate·(b−a)⌋.
func TestFleetMintsNothing(t *testing.T) {
	srv := needServer(t)
	d := fleetDuration(t)
	const rate, burst = 2000, 50
	k := key(t)
	require.NoError(t, client(t, srv.addr()).Del(context.Background(), k).Err())

	var mu sync.Mutex
	var spends []time.Duration
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for g := range 8 {
		l, err := rediscredit.New(client(t, srv.addr()), rate, burst)
		require.NoError(t, err)
		wg.Go(func() {
			ctx := context.Background()
			var mine []time.Duration
			for time.Now().Before(end) {
				var res rediscredit.Result
				var err error
				n := int64(g%3 + 1)
				if g < 4 {
					res, err = l.TrySpend(ctx, k, n)
				} else {
					res, err = l.Spend(ctx, k, n)
				}
				if err != nil {
					t.Error(err)
					return
				}
				if res.OK {
					for range n {
						mine = append(mine, at(res))
					}
				}
				if g < 4 {
					time.Sleep(200 * time.Microsecond)
				}
			}
			mu.Lock()
			spends = append(spends, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	got := float64(len(spends)-burst) / d.Seconds()
	t.Logf("8 clients, %v: %d credits spent at rate %d and burst %d (%.1f%% of the rate after the burst)",
		d, len(spends), rate, burst, 100*got/rate)
	// A floor far below the rate, for loaded machines: it only makes sure
	// the law below is checked over many windows.
	require.Greater(t, got, rate/10.0, "the fleet spent too little for the check to mean much")
	require.NoError(t, credittest.CheckWindows(rate, burst, spends))
}

// Spend(1) at 1,000 a second with a burst of 1, from four clients with
// their own connections: the rate achieved, from the clients' clocks and
// from the server's. Spend claims credit before it accrues, so pacing
// does not lose the time between a credit accruing and a client spending
// it. The times the server reports must keep the law (no window holds more
// than 1 + ⌊rate·(b−a)⌋); the rate achieved is a measurement, in the log,
// asserted only to be above a quarter, for loaded machines.
func TestPacing(t *testing.T) {
	srv := needServer(t)
	d := fleetDuration(t)
	const rate = 1000
	k := key(t)
	require.NoError(t, client(t, srv.addr()).Del(context.Background(), k).Err())

	var mu sync.Mutex
	var spends []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for range 4 {
		l, err := rediscredit.New(client(t, srv.addr()), rate, 1)
		require.NoError(t, err)
		wg.Go(func() {
			ctx, cancel := context.WithDeadline(context.Background(), start.Add(d))
			defer cancel()
			for {
				res, err := l.Spend(ctx, k, 1)
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Error(err)
					}
					return
				}
				mu.Lock()
				spends = append(spends, at(res))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	require.NoError(t, credittest.CheckWindows(rate, 1, spends))
	count := len(spends)
	first, last := slices.Min(spends), slices.Max(spends)
	byClients := float64(count) / wall.Seconds() / rate
	byServer := float64(count-1) / (last - first).Seconds() / rate
	t.Logf("pacing: %d spends in %v: %.2f%% of the rate by the clients' clock, %.2f%% by the server's",
		count, wall.Round(time.Millisecond), 100*byClients, 100*byServer)
	require.GreaterOrEqual(t, byClients, 0.25)
}
