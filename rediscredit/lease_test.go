package rediscredit_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credittest"
	"github.com/atomicsem/atomicsem/internal/faultnet"
	"github.com/atomicsem/atomicsem/rediscredit"
)

// leaseCall is one lease round trip as Redis answered it: its time on the
// server's clock (µs), the credit granted, the credit the call gave back,
// and the bucket's balance and reservations after it.
type leaseCall struct {
	now             int64
	granted, given  int64
	avail, reserved int64
}

// leaseRecord is a go-redis hook that keeps Redis's answer to every lease
// call a client makes: the backend's own record of what it granted, and
// when.
type leaseRecord struct {
	mu    sync.Mutex
	calls []leaseCall
}

func (r *leaseRecord) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *leaseRecord) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (r *leaseRecord) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if err != nil || len(args) != 11 || args[5] != "lease" {
			return err
		}
		v := cmd.(interface{ Val() string }).Val()
		if len(v) != 56 {
			return err
		}
		word := func(i int) int64 {
			return int64(math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[8*i:]))))
		}
		r.mu.Lock()
		r.calls = append(r.calls, leaseCall{
			now: word(3), granted: word(0), given: args[8].(int64),
			avail: word(1), reserved: word(2),
		})
		r.mu.Unlock()
		return err
	}
}

// checkNetGrants checks Redis's record of lease calls: after every call
// the balance and the reservations fit the burst, and in every window
// [a, b] of the server's clock the credit granted less the credit given
// back is at most burst + ⌊rate·(b−a)⌋.
func checkNetGrants(rate float64, burst int64, calls []leaseCall) error {
	c := slices.Clone(calls)
	sort.Slice(c, func(i, j int) bool { return c[i].now < c[j].now })
	for _, x := range c {
		if x.avail+x.reserved > burst {
			return fmt.Errorf("at %d µs the balance %d and reservations %d exceed the burst %d", x.now, x.avail, x.reserved, burst)
		}
	}
	for i := range c {
		var net int64
		for j := i; j < len(c); j++ {
			net += c[j].granted - c[j].given
			w := time.Duration(c[j].now-c[i].now) * time.Microsecond
			// The float estimate settles all but the windows within a
			// credit of the bound; those are computed exactly.
			if float64(net-burst) < rate*w.Seconds()-1 {
				continue
			}
			if allowed := burst + credittest.Accrued(rate, w); net > allowed {
				return fmt.Errorf("%d credits granted net in a window of %v from %d µs, where at most %d accrue on a burst of %d", net, w, c[i].now, allowed, burst)
			}
		}
	}
	return nil
}

// micros is t on the host's clock, which is the clock Redis's TIME reads
// on loopback, as a duration since the Unix epoch.
func micros(t time.Time) time.Duration { return time.Duration(t.UnixMicro()) * time.Microsecond }

// A lease spends from its pool with few round trips, and Close settles
// what it spent and gives the rest back: at a rate of 0 the bucket in
// Redis ends with exactly the burst less the credit spent.
func TestLeaseSpendsLocallyAndGivesBackAtClose(t *testing.T) {
	srv := needServer(t)
	var n counter
	c := client(t, srv.addr(), &n)
	ctx := context.Background()
	k := key(t)
	require.NoError(t, c.Del(ctx, k).Err())
	l, err := rediscredit.New(c, 0, 1000)
	require.NoError(t, err)
	le, err := l.Lease(k)
	require.NoError(t, err)
	require.Equal(t, k, le.Key())
	for range 300 {
		ok, err := le.TrySpend(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
	}
	for range 100 {
		require.NoError(t, le.Spend(ctx, 1))
	}
	ok, err := le.TrySpend(ctx, 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, le.Spend(ctx, 0))
	st := le.Stats()
	t.Logf("400 spends: %+v", st)
	require.Less(t, st.Calls, int64(200), "one round trip per spend or more")
	require.LessOrEqual(t, n.n.Load(), st.Calls+2, "round trips the lease did not count (the DEL, and an EVAL after NOSCRIPT, are the test's and the client's)")
	res, err := l.Stats(ctx, k)
	require.NoError(t, err)
	require.Equal(t, st.Reserved, res.Reserved)
	require.GreaterOrEqual(t, res.Balance+res.Reserved, int64(600), "spent credit is reserved until it is settled")
	require.NoError(t, le.Close(ctx))
	require.NoError(t, le.Close(ctx), "a second Close does nothing")
	after := le.Stats()
	require.Equal(t, [2]int64{0, 0}, [2]int64{after.Balance, after.Reserved})
	require.Greater(t, after.Calls, st.Calls, "Close made no round trip")
	res, err = l.Stats(ctx, k)
	require.NoError(t, err)
	require.Equal(t, [2]int64{600, 0}, [2]int64{res.Balance, res.Reserved})

	ok, err = le.TrySpend(ctx, 1)
	require.ErrorIs(t, err, rediscredit.ErrLeaseClosed)
	require.False(t, ok)
	require.ErrorIs(t, le.Spend(ctx, 1), rediscredit.ErrLeaseClosed)
}

// Inputs get the answers the Limiter gives them; options are checked.
func TestLeaseRefusesBadInput(t *testing.T) {
	srv := needServer(t)
	c := client(t, srv.addr())
	ctx := context.Background()
	l, err := rediscredit.New(c, 10, 5, rediscredit.WithHold(time.Second))
	require.NoError(t, err)
	_, err = l.Lease("k", rediscredit.WithLeaseInterval(time.Microsecond))
	require.ErrorContains(t, err, "under a millisecond")
	_, err = l.Lease("k", rediscredit.WithLeaseInterval(300*time.Millisecond))
	require.ErrorContains(t, err, "above a quarter of the hold")
	require.PanicsWithValue(t, "rediscredit: nil LeaseOption", func() { _, _ = l.Lease("k", nil) })
	le, err := l.Lease(key(t))
	require.NoError(t, err)
	defer le.Close(ctx)
	_, err = le.TrySpend(ctx, -1)
	require.ErrorIs(t, err, atomicsem.ErrInvalidPermits)
	_, err = le.TrySpend(ctx, 6)
	require.ErrorIs(t, err, atomicsem.ErrExceedsMax)
	require.ErrorIs(t, le.Spend(ctx, -1), atomicsem.ErrInvalidPermits)
	require.ErrorIs(t, le.Spend(ctx, 6), atomicsem.ErrExceedsMax)
	var nilCtx context.Context
	require.PanicsWithValue(t, "rediscredit: nil Context", func() { _, _ = le.TrySpend(nilCtx, 9) })
	require.PanicsWithValue(t, "rediscredit: nil Context", func() { _ = le.Spend(nilCtx, 9) })
	require.PanicsWithValue(t, "rediscredit: nil Context", func() { _ = le.Close(nilCtx) })
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = le.TrySpend(done, 1)
	require.Equal(t, context.Canceled, err)
	require.Equal(t, context.Canceled, le.Spend(done, 1))
	require.Equal(t, int64(0), le.Stats().Calls, "bad input made a round trip")
}

// A Spend waiting for credit when the lease closes returns ErrLeaseClosed.
func TestLeaseCloseEndsAWaitingSpend(t *testing.T) {
	srv := needServer(t)
	c := client(t, srv.addr())
	ctx := context.Background()
	k := key(t)
	require.NoError(t, c.Del(ctx, k).Err())
	l, err := rediscredit.New(c, 0, 10)
	require.NoError(t, err)
	_, err = l.TrySpend(ctx, k, 10)
	require.NoError(t, err)
	le, err := l.Lease(k)
	require.NoError(t, err)
	done := make(chan error)
	go func() { done <- le.Spend(ctx, 1) }()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, le.Close(ctx))
	require.ErrorIs(t, <-done, rediscredit.ErrLeaseClosed)
}

// Eight processes (each a client of its own), whose demand shifts among
// them every 100 ms, spend from one key through leases, half by TrySpend
// and half by Spend: every spend, on the host's clock (Redis's on
// loopback), keeps the law, no window above burst + ⌊rate·(b−a)⌋; and
// Redis's own record of the leases' calls keeps it for the credit granted
// net of what was given back.
func TestLeaseFleetKeepsTheLaw(t *testing.T) {
	srv := needServer(t)
	d := fleetDuration(t)
	const rate, burst = 5000, 500
	k := key(t)
	require.NoError(t, client(t, srv.addr()).Del(context.Background(), k).Err())

	var rec leaseRecord
	var mu sync.Mutex
	var spends []time.Duration
	var calls, failures int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for g := range 8 {
		l, err := rediscredit.New(client(t, srv.addr(), &rec), rate, burst)
		require.NoError(t, err)
		le, err := l.Lease(k, rediscredit.WithLeaseInterval(50*time.Millisecond))
		require.NoError(t, err)
		wg.Go(func() {
			ctx := context.Background()
			var mine []time.Duration
			for now := time.Now(); now.Before(end); now = time.Now() {
				// In each 100 ms, two of the eight spend as fast as they
				// can, and the rest one credit each millisecond.
				if phase := int(now.Sub(start)/(100*time.Millisecond)) % 4; g%4 != phase {
					time.Sleep(time.Millisecond)
				}
				n := int64(g%3 + 1)
				var ok bool
				var err error
				if g%2 == 0 {
					ok, err = le.TrySpend(ctx, n)
				} else {
					sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
					err = le.Spend(sctx, n)
					cancel()
					ok = err == nil
					if errors.Is(err, context.DeadlineExceeded) {
						err = nil
					}
				}
				if err != nil {
					t.Error(err)
					break
				}
				if ok {
					at := micros(time.Now())
					for range n {
						mine = append(mine, at)
					}
				}
			}
			require.NoError(t, le.Close(ctx))
			st := le.Stats()
			mu.Lock()
			spends = append(spends, mine...)
			calls += st.Calls
			failures += st.Failures
			mu.Unlock()
		})
	}
	wg.Wait()
	got := float64(len(spends)-burst) / d.Seconds()
	t.Logf("8 leases, %v: %d credits spent at rate %d and burst %d (%.1f%% of the rate after the burst); %d round trips (%.1f per 1,000 credits), %d failed",
		d, len(spends), rate, burst, 100*got/rate, calls, 1000*float64(calls)/float64(len(spends)), failures)
	require.Greater(t, got, rate/10.0, "the fleet spent too little for the check to mean much")
	require.Zero(t, failures)
	require.NoError(t, credittest.CheckWindows(rate, burst, spends))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.calls, int(calls))
	require.NoError(t, checkNetGrants(rate, burst, rec.calls))
}

// Credit a lease does not spend goes back within an interval and three
// eighths (plus a round trip): a process that waits for credit another
// holds idle is blocked no longer than that, and the next look of its own
// lease. At a rate of 0 the waiter's only source is the idle lease's
// return. The time it was blocked is measured and logged.
func TestLeaseIdleCreditGoesBackWithinTheBound(t *testing.T) {
	srv := needServer(t)
	ctx := context.Background()
	k := key(t)
	require.NoError(t, client(t, srv.addr()).Del(ctx, k).Err())
	const interval = 100 * time.Millisecond
	la, err := rediscredit.New(client(t, srv.addr()), 0, 100)
	require.NoError(t, err)
	lb, err := rediscredit.New(client(t, srv.addr()), 0, 100)
	require.NoError(t, err)
	a, err := la.Lease(k, rediscredit.WithLeaseInterval(interval))
	require.NoError(t, err)
	defer a.Close(ctx)
	b, err := lb.Lease(k, rediscredit.WithLeaseInterval(interval))
	require.NoError(t, err)
	defer b.Close(ctx)

	// a spends 10 over 10 ms, which sizes its block at its cap (half the
	// bucket), and then stops.
	for range 10 {
		ok, err := a.TrySpend(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		time.Sleep(time.Millisecond)
	}
	last := time.Now()
	require.Eventually(t, func() bool { return a.Stats().Reserved > 10 }, time.Second, time.Millisecond)
	held := a.Stats().Balance
	res, err := la.Stats(ctx, k)
	require.NoError(t, err)
	want := res.Balance + held // all there is: b needs all of a's idle credit
	require.Greater(t, held, int64(10))
	t.Logf("a holds %d idle, Redis %d; b asks for %d", held, res.Balance, want)

	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, b.Spend(sctx, want))
	blocked := time.Since(start)
	sinceLast := time.Since(last)
	bound := interval + 3*interval/8 + interval/4
	t.Logf("b was blocked %v by a's idle credit (%v after a's last spend); the bound is %v and two round trips",
		blocked.Round(time.Millisecond), sinceLast.Round(time.Millisecond), bound)
	// The margin is for a loaded machine; the figure is in the log.
	require.Less(t, sinceLast, bound+300*time.Millisecond)
}

// A lease whose process dies leaves its reservation in Redis until a
// generation (one hold) has passed without a call of its own: between one
// and two holds on, Redis drops it, and counts it as spent (at a rate of
// 0 the balance does not grow back), so no credit taken is given twice.
func TestLeaseOfADeadProcessIsDroppedWithinTwoHolds(t *testing.T) {
	srv := needServer(t)
	c := client(t, srv.addr())
	ctx := context.Background()
	k := key(t)
	require.NoError(t, c.Del(ctx, k).Err())
	const hold = 200 * time.Millisecond
	l, err := rediscredit.New(c, 0, 100, rediscredit.WithHold(hold))
	require.NoError(t, err)
	le, err := l.Lease(k, rediscredit.WithLeaseInterval(hold/4))
	require.NoError(t, err)
	for range 20 {
		ok, err := le.TrySpend(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		time.Sleep(500 * time.Microsecond)
	}
	rediscredit.AbandonLease(le)
	died := time.Now()
	res, err := l.Stats(ctx, k)
	require.NoError(t, err)
	require.Positive(t, res.Reserved)
	before := res.Balance
	t.Logf("the lease died holding %d reserved; the balance is %d", res.Reserved, before)
	for res.Reserved > 0 {
		require.Less(t, time.Since(died), 2*hold+200*time.Millisecond, "the reservation outlived two holds")
		time.Sleep(5 * time.Millisecond)
		res, err = l.Stats(ctx, k)
		require.NoError(t, err)
	}
	t.Logf("dropped after %v", time.Since(died).Round(time.Millisecond))
	require.GreaterOrEqual(t, time.Since(died), hold-20*time.Millisecond, "dropped before a hold")
	require.Equal(t, before, res.Balance, "dropped credit was given back")
	require.Equal(t, time.Duration(-1), ttl(t, c, k), "a bucket that never fills again at a rate of 0 keeps its key")
}

// A key whose credit a lease holds lives until Redis may drop the lease's
// generation, and then until accrual has filled the bucket: an earlier
// expiry would bring the bucket back full, the leased credit with it.
func TestLeasedKeyOutlivesItsLease(t *testing.T) {
	srv := needServer(t)
	c := client(t, srv.addr())
	ctx := context.Background()
	k := key(t)
	require.NoError(t, c.Del(ctx, k).Err())
	const hold = time.Second
	l, err := rediscredit.New(c, 1000, 100, rediscredit.WithHold(hold))
	require.NoError(t, err)
	le, err := l.Lease(k, rediscredit.WithLeaseInterval(hold/4))
	require.NoError(t, err)
	ok, err := le.TrySpend(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	rediscredit.AbandonLease(le)
	res, err := l.Stats(ctx, k)
	require.NoError(t, err)
	require.Positive(t, res.Reserved)
	// The bucket alone would be full again in under 0.1 s.
	require.Greater(t, ttl(t, c, k), hold, "the key expires before Redis may drop the lease")
}

// Accrual stops where the balance, the reservations and the credit leases
// hold come to the burst: a bucket left to refill while a lease holds a
// block shows the burst less that block, so that the fleet never has more
// than the burst to spend.
func TestAccrualLeavesRoomForLeasedCredit(t *testing.T) {
	srv := needServer(t)
	c := client(t, srv.addr())
	ctx := context.Background()
	k := key(t)
	require.NoError(t, c.Del(ctx, k).Err())
	const rate, burst = 1000, 100
	l, err := rediscredit.New(c, rate, burst)
	require.NoError(t, err)
	// An interval far longer than the test, so that the lease keeps its
	// block idle rather than give it back.
	le, err := l.Lease(k, rediscredit.WithLeaseInterval(10*time.Second))
	require.NoError(t, err)
	defer le.Close(ctx)
	// Half the burst spent directly sets accrual going, then the lease
	// takes its block from what is left.
	res, err := l.TrySpend(ctx, k, burst/2)
	require.NoError(t, err)
	require.True(t, res.OK)
	ok, err := le.TrySpend(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	leased := le.Stats().Reserved
	require.Positive(t, leased)
	// Long enough for accrual to mint the whole burst: any room it left
	// would be filled.
	time.Sleep(2 * burst * time.Second / rate)
	res, err = l.Stats(ctx, k)
	require.NoError(t, err)
	require.Equal(t, leased, res.Reserved, "the lease's block is reserved in Redis")
	require.Equal(t, int64(burst), res.Balance+res.Reserved, "a full bucket holds the burst, the leased block in it")
}

// At a steady demand of 5,000 credits a second a lease makes at most 20
// round trips per 1,000 credits.
func TestLeaseCallsAtSteadyDemand(t *testing.T) {
	srv := needServer(t)
	ctx := context.Background()
	k := key(t)
	require.NoError(t, client(t, srv.addr()).Del(ctx, k).Err())
	l, err := rediscredit.New(client(t, srv.addr()), 1e6, 1e6)
	require.NoError(t, err)
	le, err := l.Lease(k)
	require.NoError(t, err)
	d := fleetDuration(t)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	var spent int64
	for now := range tick.C {
		// Five credits per millisecond of the clock, however late the tick.
		for due := int64(now.Sub(start)/time.Millisecond) * 5; spent < due; spent++ {
			ok, err := le.TrySpend(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
		}
		if now.Sub(start) >= d {
			break
		}
	}
	st := le.Stats()
	require.NoError(t, le.Close(ctx))
	per := 1000 * float64(st.Calls) / float64(spent)
	t.Logf("%d credits over %v in %d round trips: %.1f per 1,000 credits (block %d)", spent, d, st.Calls, per, st.Block)
	require.LessOrEqual(t, per, 20.0)
}

// faultLease is a lease behind a fault proxy, and the Limiter it came from.
type faultLease struct {
	px *faultnet.Proxy
	l  *rediscredit.Limiter
	le *rediscredit.Lease
}

func newFaultLease(t *testing.T, k string, rate float64, burst int64, hold time.Duration, opts ...rediscredit.Option) faultLease {
	t.Helper()
	srv := needServer(t)
	px, err := faultnet.New(srv.addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	c := redis.NewClient(&redis.Options{
		Addr: px.Addr(), ContextTimeoutEnabled: true, DialTimeout: 100 * time.Millisecond, DialerRetries: 1,
	})
	t.Cleanup(func() { _ = c.Close() })
	l, err := rediscredit.New(c, rate, burst, append(opts, rediscredit.WithHold(hold))...)
	require.NoError(t, err)
	le, err := l.Lease(k, rediscredit.WithLeaseInterval(hold/4))
	require.NoError(t, err)
	return faultLease{px, l, le}
}

// A lease that loses Redis fails closed: it serves the credit it holds
// and no more, each further call failing with ErrUnavailable within its
// deadline, and stops serving even that before Redis could drop it. Once
// Redis answers again, it works again.
func TestLeaseFailsClosedWithWhatItHolds(t *testing.T) {
	ctx := context.Background()
	k := key(t)
	const hold = 400 * time.Millisecond
	f := newFaultLease(t, k, 0, 1000, hold)
	defer f.le.Close(ctx)
	require.NoError(t, client(t, f.px.Target()).Del(ctx, k).Err())
	for range 20 {
		ok, err := f.le.TrySpend(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		time.Sleep(500 * time.Microsecond)
	}
	for _, fault := range []string{"black hole", "refused"} {
		t.Run(fault, func(t *testing.T) {
			if fault == "refused" {
				require.NoError(t, f.px.Refuse(true))
				defer func() { require.NoError(t, f.px.Refuse(false)) }()
			} else {
				f.px.BlackHole(true)
				defer f.px.BlackHole(false)
			}
			f.px.Reset()
			held := f.le.Stats().Balance
			cut := time.Now()
			served, unavailable := int64(0), 0
			for time.Since(cut) < hold {
				cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				start := time.Now()
				ok, err := f.le.TrySpend(cctx, 1)
				took := time.Since(start)
				cancel()
				switch {
				case ok:
					served++
					require.Less(t, time.Since(cut), hold, "credit served past the hold")
				case errors.Is(err, rediscredit.ErrUnavailable):
					unavailable++
					require.Less(t, took, time.Second, "a call outlived its deadline by far")
				case errors.Is(err, context.DeadlineExceeded):
					// A loaded machine ended the call's 50 ms before it looked.
				default:
					require.NoError(t, err)
				}
			}
			t.Logf("%s: held %d, served %d, %d calls unavailable", fault, held, served, unavailable)
			require.LessOrEqual(t, served, held)
			require.Positive(t, unavailable)
			require.ErrorIs(t, f.le.Spend(ctx, 1), rediscredit.ErrUnavailable)
		})
		require.Eventually(t, func() bool {
			ok, err := f.le.TrySpend(ctx, 1)
			return ok && err == nil
		}, 5*time.Second, 10*time.Millisecond, "the lease did not recover")
	}
}

// With the Limiter's fallback, a lease that has spent what it holds while
// Redis is unavailable decides by the fallback's bucket: over the outage
// it grants at most what it held, plus the fallback's burst and share of
// the rate.
func TestLeaseFailsOpenWithinTheFallbackBound(t *testing.T) {
	ctx := context.Background()
	k := key(t)
	const hold = 400 * time.Millisecond
	const rate, burst, share = 100, 100, 0.5
	f := newFaultLease(t, k, rate, burst, hold, rediscredit.WithFallback(share))
	defer f.le.Close(ctx)
	require.NoError(t, client(t, f.px.Target()).Del(ctx, k).Err())
	for range 10 {
		ok, err := f.le.TrySpend(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, f.px.Refuse(true))
	f.px.Reset()
	held := f.le.Stats().Balance
	cut := time.Now()
	var served int64
	for time.Since(cut) < time.Second {
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		ok, err := f.le.TrySpend(cctx, 1)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			// A call decides by the fallback, or, on a loaded machine that
			// wakes it late, ends at its deadline; nothing else.
			require.NoError(t, err)
		}
		if ok {
			served++
		}
		time.Sleep(time.Millisecond)
	}
	w := time.Since(cut)
	bound := held + int64(share*burst) + credittest.Accrued(share*rate, w)
	st := f.le.Stats()
	t.Logf("held %d; over %v served %d (%d by the fallback); the bound is %d", held, w.Round(time.Millisecond), served, st.Local, bound)
	require.Positive(t, st.Local)
	require.LessOrEqual(t, served, bound)
	require.NoError(t, f.px.Refuse(false))
}

// Leases of many goroutines at once answer as the pool and Redis hold:
// 64 goroutines spend from a bucket of 10,000 at a rate of 0 and get
// exactly what it holds, no more.
func TestLeaseManyGoroutinesGetExactlyTheBucket(t *testing.T) {
	srv := needServer(t)
	ctx := context.Background()
	k := key(t)
	require.NoError(t, client(t, srv.addr()).Del(ctx, k).Err())
	var total atomic.Int64
	var wg sync.WaitGroup
	for p := range 2 {
		l, err := rediscredit.New(client(t, srv.addr()), 0, 10000)
		require.NoError(t, err)
		le, err := l.Lease(k)
		require.NoError(t, err)
		for g := range 32 {
			wg.Go(func() {
				misses := 0
				for misses < 3 {
					var ok bool
					var err error
					if (p+g)%2 == 0 {
						ok, err = le.TrySpend(ctx, 1)
					} else {
						sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
						err = le.Spend(sctx, 1)
						cancel()
						ok = err == nil
						if errors.Is(err, context.DeadlineExceeded) {
							err = nil
						}
					}
					require.NoError(t, err)
					if ok {
						total.Add(1)
						misses = 0
					} else {
						misses++
					}
				}
			})
		}
		defer func() { require.NoError(t, le.Close(ctx)) }()
	}
	wg.Wait()
	require.LessOrEqual(t, total.Load(), int64(10000))
	require.Greater(t, total.Load(), int64(9000), "credit left unspent")
}

// A lease that has lost Redis stops spending what it holds before Redis
// could drop its reservation: no spend succeeds after Redis has dropped
// it (which a direct client sees as the bucket's reservations at 0),
// however much the pool still holds.
func TestLeaseStopsServingBeforeRedisDropsIt(t *testing.T) {
	ctx := context.Background()
	k := key(t)
	const hold = 400 * time.Millisecond
	f := newFaultLease(t, k, 0, 1000, hold)
	defer f.le.Close(ctx)
	direct, err := rediscredit.New(client(t, f.px.Target()), 0, 1000, rediscredit.WithHold(hold))
	require.NoError(t, err)
	require.NoError(t, client(t, f.px.Target()).Del(ctx, k).Err())
	// Bursts of demand until the lease holds more than 100: its looks size
	// its block by the rate of spends they see, which a loaded machine can
	// spread too thin for one burst to do it.
	deadline := time.Now().Add(10 * time.Second)
	for f.le.Stats().Balance <= 100 {
		require.True(t, time.Now().Before(deadline), "the lease never held more than 100")
		for range 40 {
			ok, err := f.le.TrySpend(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
		}
		for end := time.Now().Add(hold / 2); time.Now().Before(end) && f.le.Stats().Balance <= 100; {
			time.Sleep(time.Millisecond)
		}
	}
	require.NoError(t, f.px.Refuse(true))
	f.px.Reset()
	cut := time.Now()
	held := f.le.Stats().Balance
	var served int64
	var last, dropped time.Duration
	for time.Since(cut) < 3*hold && dropped == 0 {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		ok, err := f.le.TrySpend(cctx, 1)
		cancel()
		if ok {
			served++
			last = time.Since(cut)
		} else if !errors.Is(err, context.DeadlineExceeded) { // a loaded machine may end the call's 20 ms before it looks
			require.ErrorIs(t, err, rediscredit.ErrUnavailable)
		}
		res, err := direct.Stats(ctx, k)
		require.NoError(t, err)
		if res.Reserved == 0 {
			dropped = time.Since(cut)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("held %d when cut off; served %d, the last %v after the cut; Redis dropped the reservation %v after it (hold %v)",
		held, served, last.Round(time.Millisecond), dropped.Round(time.Millisecond), hold)
	require.Positive(t, served)
	require.Positive(t, dropped, "Redis never dropped the reservation")
	require.Less(t, served, held, "the pool ran dry: the test shows nothing")
	require.Less(t, last, dropped, "credit served after Redis dropped it")
	require.NoError(t, f.px.Refuse(false))
}

// Answers lost to resets, after Redis applied the call or before it got
// there, neither mint credit nor spend it twice: four leases, one call in
// five reset after it was applied and one in eleven before it arrived,
// keep the law on every spend. (A block granted by a call whose answer
// was lost stays reserved until Redis drops its generation: the hold here
// is short, so that the fleet goes on spending.)
func TestLeaseLostAnswersMintNothing(t *testing.T) {
	srv := needServer(t)
	d := fleetDuration(t)
	const rate, burst = 5000, 500
	k := key(t)
	require.NoError(t, client(t, srv.addr()).Del(context.Background(), k).Err())
	var mu sync.Mutex
	var spends []time.Duration
	var lost int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for g := range 4 {
		var f faults
		f.set(func(call int64) fault {
			switch {
			case call%5 == 0:
				return resetAfter
			case call%11 == 0:
				return resetBefore
			}
			return answered
		})
		l, err := rediscredit.New(client(t, srv.addr(), &f), rate, burst, rediscredit.WithHold(200*time.Millisecond))
		require.NoError(t, err)
		le, err := l.Lease(k, rediscredit.WithLeaseInterval(20*time.Millisecond))
		require.NoError(t, err)
		wg.Go(func() {
			ctx := context.Background()
			var mine []time.Duration
			for time.Now().Before(end) {
				ok, err := le.TrySpend(ctx, int64(g%2+1))
				if err != nil {
					require.ErrorIs(t, err, rediscredit.ErrUnavailable)
					continue
				}
				if ok {
					at := micros(time.Now())
					for range g%2 + 1 {
						mine = append(mine, at)
					}
				}
			}
			_ = le.Close(ctx)
			mu.Lock()
			spends = append(spends, mine...)
			lost += f.count[resetAfter].Load() + f.count[resetBefore].Load()
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("4 leases, %v: %d credits spent at rate %d and burst %d; %d answers lost", d, len(spends), rate, burst, lost)
	require.Positive(t, lost)
	require.Greater(t, len(spends), burst, "too few spends for the check to mean much")
	require.NoError(t, credittest.CheckWindows(rate, burst, spends))
}
