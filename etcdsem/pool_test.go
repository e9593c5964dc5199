package etcdsem_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/etcdsem"
)

// newPool returns a pool of h's semaphore with interval, closed when t
// ends.
func newPool(t testing.TB, h *handle, interval time.Duration) *etcdsem.Pool {
	t.Helper()
	p, err := etcdsem.NewPool(h.Semaphore, etcdsem.WithPoolInterval(interval))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// A pool serves its process's acquires locally: four goroutines cycle
// 2,000 acquires through it with a handful of round trips, and Close gives
// every permit back.
func TestPoolServesLocallyAndGivesBackAtClose(t *testing.T) {
	srv := startServer(t)
	h := newHandle(t, srv, prefixFor(t), 10, 10, handleOpts{})
	p := newPool(t, h, 10*time.Second) // no idle permits go back during the test
	ctx := testCtx(t)
	tok, ok, err := p.TryAcquire(ctx, 10)
	require.NoError(t, err)
	require.True(t, ok, "the pool takes the shortfall at once")
	_, ok, err = p.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.False(t, ok)
	tok.Release()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 500 {
				tok, err := p.Acquire(ctx, 2)
				require.NoError(t, err)
				tok.Release()
			}
		})
	}
	wg.Wait()
	st := p.Stats()
	t.Logf("2,000 acquires: %+v", st)
	require.LessOrEqual(t, st.Held, int64(10))
	require.Less(t, st.Calls, int64(40), "a round trip per acquire or more")
	require.Equal(t, int64(0), st.InUse)
	require.Equal(t, p.Stats().Held, mustStats(t, h.Semaphore).Held)

	require.NoError(t, p.Close(ctx))
	require.NoError(t, p.Close(ctx), "a second Close does nothing")
	require.Equal(t, int64(0), mustStats(t, h.Semaphore).Held)
	_, err = p.Acquire(ctx, 1)
	require.ErrorIs(t, err, etcdsem.ErrPoolClosed)
	_, _, err = p.TryAcquire(ctx, 1)
	require.ErrorIs(t, err, etcdsem.ErrPoolClosed)
}

// Inputs get the semaphore's answers.
func TestPoolRefusesBadInput(t *testing.T) {
	srv := startServer(t)
	h := newHandle(t, srv, prefixFor(t), 3, 5, handleOpts{})
	_, err := etcdsem.NewPool(h.Semaphore, etcdsem.WithPoolInterval(time.Millisecond))
	require.ErrorContains(t, err, "under 10ms")
	require.PanicsWithValue(t, "etcdsem: NewPool: nil PoolOption", func() { _, _ = etcdsem.NewPool(h.Semaphore, nil) })
	p := newPool(t, h, 100*time.Millisecond)
	ctx := testCtx(t)
	_, err = p.Acquire(ctx, -1)
	require.ErrorIs(t, err, etcdsem.ErrInvalidPermits)
	_, err = p.Acquire(ctx, 6)
	require.ErrorIs(t, err, etcdsem.ErrExceedsMax)
	_, _, err = p.TryAcquire(ctx, 6)
	require.ErrorIs(t, err, etcdsem.ErrExceedsMax)
	tok, err := p.Acquire(ctx, 0)
	require.NoError(t, err)
	tok.Release()
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = p.Acquire(done, 1)
	require.Equal(t, context.Canceled, err)
	require.Equal(t, int64(0), p.Stats().Calls)
}

// Eight processes (a client, session and pool each) whose demand shifts
// among them every 100 ms acquire and release through their pools: the
// permits in use across the fleet, counted as they are used, never exceed
// the limit, and etcd's own history, replayed against the rules, shows
// every grant admitted at its revision.
func TestPoolFleetKeepsTheLimit(t *testing.T) {
	srv := startServer(t)
	prefix := prefixFor(t)
	rec := record(t, srv, prefix)
	const limit = 6
	var inUse, peak, acquires atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(poolRun(t))
	calls := make([]int64, 8)
	for g := range 8 {
		h := newHandle(t, srv, prefix, limit, limit, handleOpts{})
		p := newPool(t, h, 100*time.Millisecond)
		wg.Go(func() {
			ctx := testCtx(t)
			var inner sync.WaitGroup
			for w := range 3 {
				inner.Go(func() {
					for now := time.Now(); now.Before(end); now = time.Now() {
						// Two processes of the eight are busy in each 100
						// ms; the rest acquire now and then.
						if int(now.Sub(start)/(100*time.Millisecond))%4 != g%4 {
							time.Sleep(5 * time.Millisecond)
						}
						actx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
						tok, err := p.Acquire(actx, int64(w%2+1))
						cancel()
						if errors.Is(err, context.DeadlineExceeded) {
							continue
						}
						require.NoError(t, err)
						n := inUse.Add(int64(w%2 + 1))
						for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
						}
						acquires.Add(1)
						time.Sleep(100 * time.Microsecond)
						inUse.Add(-int64(w%2 + 1))
						tok.Release()
					}
				})
			}
			inner.Wait()
			require.NoError(t, p.Close(ctx))
			calls[g] = p.Stats().Calls
		})
	}
	wg.Wait()
	var total int64
	for _, c := range calls {
		total += c
	}
	events := rec.stop(t)
	st, err := checkHistory(prefix, events)
	require.NoError(t, err)
	t.Logf("8 pools: %d acquires, at most %d permits in use at once (limit %d); %d round trips (%.1f per 1,000 acquires); etcd: %d grants in %d revisions",
		acquires.Load(), peak.Load(), limit, total, 1000*float64(total)/float64(acquires.Load()), st.grants, st.revisions)
	require.LessOrEqual(t, peak.Load(), int64(limit))
	require.Greater(t, acquires.Load(), int64(100))
}

// poolRun is how long the pool fleet test runs: $ETCDSEM_POOL (a Go
// duration), one second by default.
func poolRun(t *testing.T) time.Duration {
	if s := os.Getenv("ETCDSEM_POOL"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err)
		return d
	}
	return time.Second
}

// Permits a pool holds and no local holder uses go back within an
// interval and a round trip, whether or not anyone waits for them; and a
// process that waits for permits another pool holds idle is served within
// that bound too. The times are measured and logged.
func TestPoolIdlePermitsGoBackWithinAnInterval(t *testing.T) {
	srv := startServer(t)
	prefix := prefixFor(t)
	const interval = 200 * time.Millisecond
	a := newPool(t, newHandle(t, srv, prefix, 5, 5, handleOpts{}), interval)
	b := newHandle(t, srv, prefix, 5, 5, handleOpts{})
	ctx := testCtx(t)

	// Nobody waits: the idle permits go back all the same.
	tok, err := a.Acquire(ctx, 5)
	require.NoError(t, err)
	tok.Release()
	last := time.Now()
	require.Equal(t, int64(5), a.Stats().Held)
	require.Eventually(t, func() bool { return mustStats(t, b.Semaphore).Held == 0 }, 5*time.Second, 5*time.Millisecond)
	returned := time.Since(last)

	// Another process waits for them.
	tok, err = a.Acquire(ctx, 5)
	require.NoError(t, err)
	tok.Release()
	last = time.Now()
	tok, err = b.Acquire(ctx, 3)
	require.NoError(t, err)
	blocked := time.Since(last)
	tok.Release()
	t.Logf("idle permits went back %v after their last use; a waiter was blocked %v by a pool's idle permits (interval %v)",
		returned.Round(time.Millisecond), blocked.Round(time.Millisecond), interval)
	// The margin is for a loaded machine.
	require.Less(t, returned, interval+interval/2+500*time.Millisecond)
	require.Less(t, blocked, interval+interval/2+500*time.Millisecond)
}

// Two busy processes share the limit: a pool that holds every permit,
// cycling them among its own goroutines, shrinks to its fair share once
// another process waits, so that the other is served within about an
// interval and both get a fair part of the acquires from then on.
func TestPoolSharesTheLimitWithAWaitingProcess(t *testing.T) {
	srv := startServer(t)
	prefix := prefixFor(t)
	const limit, interval = 4, 100 * time.Millisecond
	a := newPool(t, newHandle(t, srv, prefix, limit, limit, handleOpts{}), interval)
	b := newPool(t, newHandle(t, srv, prefix, limit, limit, handleOpts{}), interval)
	ctx := testCtx(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var countA, countB atomic.Int64
	busy := func(p *etcdsem.Pool, count *atomic.Int64) {
		for range 8 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					actx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
					tok, err := p.Acquire(actx, 1)
					cancel()
					if errors.Is(err, context.DeadlineExceeded) {
						continue
					}
					require.NoError(t, err)
					count.Add(1)
					time.Sleep(200 * time.Microsecond)
					tok.Release()
				}
			})
		}
	}
	busy(a, &countA)
	require.Eventually(t, func() bool { return a.Stats().Held == limit }, 5*time.Second, time.Millisecond)
	arrived := time.Now()
	busy(b, &countB)
	require.Eventually(t, func() bool { return countB.Load() > 0 }, 5*time.Second, time.Millisecond)
	first := time.Since(arrived)
	time.Sleep(4 * interval)
	a0, b0 := countA.Load(), countB.Load()
	time.Sleep(10 * interval)
	close(stop)
	wg.Wait()
	da, db := countA.Load()-a0, countB.Load()-b0
	t.Logf("the waiting process was first served %v after it arrived (interval %v); then %d acquires against %d (shares at the last look: %d and %d)",
		first.Round(time.Millisecond), interval, da, db, a.Stats().Share, b.Stats().Share)
	require.Less(t, first, interval+time.Second, "the margin is for a loaded machine")
	require.Greater(t, db, (da+db)/5, "the waiting process got under a fifth of the acquires")
	require.Greater(t, da, (da+db)/5)
}

// SetLimit lowering the limit reaches the pools: two busy pools, each
// with three goroutines and so holding what they use with no acquire
// waiting anywhere, shrink to the new limit of 2 within about half an
// interval and the time their holders take to release.
func TestPoolFollowsALoweredLimit(t *testing.T) {
	srv := startServer(t)
	prefix := prefixFor(t)
	const interval = 100 * time.Millisecond
	admin := newHandle(t, srv, prefix, 8, 8, handleOpts{})
	ctx := testCtx(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var pools []*etcdsem.Pool
	for range 2 {
		p := newPool(t, newHandle(t, srv, prefix, 8, 8, handleOpts{}), interval)
		pools = append(pools, p)
		for range 3 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					actx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
					tok, err := p.Acquire(actx, 1)
					cancel()
					if errors.Is(err, context.DeadlineExceeded) {
						continue
					}
					require.NoError(t, err)
					time.Sleep(200 * time.Microsecond)
					tok.Release()
				}
			})
		}
	}
	require.Eventually(t, func() bool {
		st := mustStats(t, admin.Semaphore)
		return st.Waiters == 0 && pools[0].Stats().Held >= 3 && pools[1].Stats().Held >= 3
	}, 5*time.Second, 5*time.Millisecond, "the pools did not settle with what they use")
	require.NoError(t, admin.SetLimit(ctx, 2))
	lowered := time.Now()
	require.Eventually(t, func() bool { return mustStats(t, admin.Semaphore).Held <= 2 }, 10*time.Second, 5*time.Millisecond)
	took := time.Since(lowered)
	close(stop)
	wg.Wait()
	t.Logf("the fleet held the lowered limit %v after SetLimit (interval %v)", took.Round(time.Millisecond), interval)
	require.Less(t, took, interval+time.Second, "the margin is for a loaded machine")
}

// A pool that loses etcd serves the permits it holds only while its
// session's lease is sure to last, then fails its acquires with
// ErrUnavailable: no local acquire succeeds once etcd has let the lease
// go (which another process sees as the pool's permits coming back). After
// the network heals, the pool, whose session is gone, fails with
// ErrSessionLost.
func TestPoolFailsClosedWithinTheLease(t *testing.T) {
	srv := startServerBehindProxy(t)
	prefix := prefixFor(t)
	h := newHandle(t, srv, prefix, 4, 4, handleOpts{ttl: 2})
	other := newHandle(t, srv, prefix, 4, 4, handleOpts{direct: true})
	p := newPool(t, h, 100*time.Millisecond)
	ctx := testCtx(t)
	// In use for a while: the pool holds 2, and has learnt its lease's
	// time to live.
	for busy := time.Now(); time.Since(busy) < 150*time.Millisecond; {
		tok, err := p.Acquire(ctx, 2)
		require.NoError(t, err)
		time.Sleep(time.Millisecond)
		tok.Release()
	}
	srv.cut()
	cut := time.Now()
	var served int
	var last, freed time.Duration
	var lastErr error
	for time.Since(cut) < 5*time.Second && freed == 0 {
		actx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		tok, err := p.Acquire(actx, 1)
		cancel()
		switch {
		case err == nil:
			served++
			last = time.Since(cut)
			tok.Release()
		case errors.Is(err, etcdsem.ErrUnavailable), errors.Is(err, etcdsem.ErrSessionLost):
			lastErr = err
		default:
			// The 20 ms ran out: the pool waited for permits, or a loaded
			// machine spent them before the call looked.
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}
		if mustStats(t, other.Semaphore).Held == 0 {
			freed = time.Since(cut)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("cut off: served %d acquires from what it held, the last %v after the cut; etcd let the lease (2 s) go %v after it; then %v",
		served, last.Round(time.Millisecond), freed.Round(time.Millisecond), lastErr)
	require.Positive(t, served)
	require.Positive(t, freed, "etcd never let the lease go")
	// The pool stops with a sixteenth of the time to live it last learnt
	// left, and etcd gives that in whole seconds, rounded down: well before
	// etcd lets the lease go, by more than the time between two looks here.
	require.Less(t, last, freed-300*time.Millisecond, "an acquire was served as etcd gave the pool's permits back")
	require.Error(t, lastErr, "the pool never said it stopped serving")
	srv.heal()
	require.Eventually(t, func() bool {
		actx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err := p.Acquire(actx, 1)
		return errors.Is(err, etcdsem.ErrSessionLost)
	}, 10*time.Second, 50*time.Millisecond, "the pool did not see its session end")
}
