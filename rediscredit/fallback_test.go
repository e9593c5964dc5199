package rediscredit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credittest"
	"github.com/atomicsem/atomicsem/internal/faultnet"
	"github.com/atomicsem/atomicsem/rediscredit"
)

// faultsDuration is how long the flapping tests run each case:
// $REDISCREDIT_FAULTS (a Go duration), one second by default.
func faultsDuration(t *testing.T) time.Duration {
	s := os.Getenv("REDISCREDIT_FAULTS")
	if s == "" {
		return time.Second
	}
	d, err := time.ParseDuration(s)
	require.NoError(t, err, "REDISCREDIT_FAULTS")
	return d
}

// A fault is what becomes of one script call (EVALSHA or EVAL) in the
// faults hook.
type fault int

const (
	// answered: the call goes through.
	answered fault = iota
	// resetBefore: the connection resets before the request reaches Redis.
	resetBefore
	// resetAfter: Redis applies the request, and the connection resets
	// before its answer arrives.
	resetAfter
	// late: Redis applies the request, and its answer arrives after the
	// call's deadline.
	late
	// unanswered: the request never reaches Redis and nothing comes back
	// (a black hole): the call waits for its deadline.
	unanswered
)

var (
	errReset   = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	errTimeout = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
)

// faults is a go-redis hook that puts a fault on each script call, as
// plan says for the call's number (from 1), where a proxy cannot time a
// fault to one call: the same call of every two, say.
type faults struct {
	calls atomic.Int64
	plan  atomic.Pointer[func(call int64) fault]
	count [unanswered + 1]atomic.Int64
}

func (f *faults) set(plan func(call int64) fault) { f.plan.Store(&plan) }

func (f *faults) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *faults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (f *faults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		what := answered
		if p := f.plan.Load(); p != nil {
			what = (*p)(f.calls.Add(1))
		}
		f.count[what].Add(1)
		switch what {
		case resetBefore:
			return errReset
		case resetAfter:
			if err := next(ctx, cmd); err != nil {
				return err
			}
			return errReset
		case late:
			if err := next(ctx, cmd); err != nil {
				return err
			}
			<-ctx.Done()
			return errTimeout
		case unanswered:
			<-ctx.Done()
			return errTimeout
		}
		return next(ctx, cmd)
	}
}

// A grant is a credit that a call was granted, and when: within
// [start, end] of the test's clock, and, from Redis, at the server's time.
type grant struct {
	start, end time.Time
	local      bool
	server     time.Duration
}

// maxIn returns the most grants that lie wholly within one window of
// length w.
func maxIn(grants []grant, w time.Duration) int {
	best := 0
	for _, g := range grants {
		n := 0
		for _, h := range grants {
			if !h.start.Before(g.start) && !h.end.After(g.start.Add(w)) {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// checkWithin checks that in every window [a, b] of the test's clock, the
// grants that lie wholly within it number at most burst + ⌊rate·(b−a)⌋. A
// grant's moment is known only to lie within its call, so a window counts
// only the grants whose calls it holds: a count above the bound is a
// violation whatever the moments were.
func checkWithin(t *testing.T, what string, grants []grant, burst int64, rate float64) {
	t.Helper()
	byStart := slices.Clone(grants)
	slices.SortFunc(byStart, func(a, b grant) int { return a.start.Compare(b.start) })
	for i, g := range byStart {
		var ends []time.Time
		for _, h := range byStart[i:] {
			ends = append(ends, h.end)
		}
		slices.SortFunc(ends, time.Time.Compare)
		for k, e := range ends {
			w := e.Sub(g.start)
			allowed := burst + int64(math.Floor(rate*w.Seconds()))
			if int64(k+1) > allowed {
				t.Fatalf("%s: %d credits granted within %v (from %v), at most %d allowed",
					what, k+1, w, g.start.Format(time.StampMicro), allowed)
			}
		}
	}
}

// flap runs callers goroutines that spend one credit at a time from key k
// of l, each call with a 50 ms deadline, until d has passed, and returns
// what they were granted.
func flap(t *testing.T, l *rediscredit.Limiter, k string, callers int, d time.Duration) []grant {
	var mu sync.Mutex
	var grants []grant
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for range callers {
		wg.Go(func() {
			var mine []grant
			for time.Now().Before(end) {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				start := time.Now()
				res, err := l.TrySpend(ctx, k, 1)
				stop := time.Now()
				cancel()
				switch {
				case errors.Is(err, rediscredit.ErrUnavailable):
				case errors.Is(err, context.DeadlineExceeded):
					// The caller's deadline passed before the call began
					// (a loaded machine descheduled it): ctx.Err().
				case err != nil:
					t.Error(err)
					return
				case res.OK:
					mine = append(mine, grant{start: start, end: stop, local: res.Local, server: at(res)})
				}
				time.Sleep(100 * time.Microsecond)
			}
			mu.Lock()
			grants = append(grants, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return grants
}

// checkBound checks the fail-open bound on grants, from one Limiter of
// rate, burst and fallback share: Redis grants at most burst + ⌊rate·w⌋ in
// every window w of its clock, the fallback at most its own burst and
// share of the rate, and the two together at most the sum.
func checkBound(t *testing.T, grants []grant, rate float64, burst int64, share float64) {
	t.Helper()
	localBurst := max(int64(math.Floor(float64(burst)*share)), 1)
	var fromRedis []time.Duration
	var local []grant
	for _, g := range grants {
		if g.local {
			local = append(local, g)
		} else {
			fromRedis = append(fromRedis, g.server)
		}
	}
	require.NoError(t, credittest.CheckWindows(rate, burst, fromRedis), "Redis's grants, on its clock")
	checkWithin(t, "the fallback's grants", local, localBurst, share*rate)
	checkWithin(t, "all grants", grants, burst+localBurst, rate+share*rate)
}

// A key's fallback bucket keeps its state while Redis answers in between:
// spent empty in one outage, it is still empty in the next.
func TestFallbackKeepsItsStateAcrossFlaps(t *testing.T) {
	srv := needServer(t)
	var f faults
	l, err := rediscredit.New(client(t, srv.addr(), &f), 0.1, 10, rediscredit.WithFallback(0.5))
	require.NoError(t, err)
	k := key(t)
	require.NoError(t, client(t, srv.addr()).Del(context.Background(), k).Err())
	ctx := context.Background()
	down := func(int64) fault { return resetBefore }
	up := func(int64) fault { return answered }

	f.set(down)
	for i := range 5 {
		res, err := l.TrySpend(ctx, k, 1)
		require.NoError(t, err)
		require.True(t, res.Local)
		require.True(t, res.OK, "local spend %d of the fallback's burst of 5", i)
	}
	res, err := l.TrySpend(ctx, k, 1)
	require.NoError(t, err)
	require.False(t, res.OK, "the fallback's burst is spent")

	f.set(up)
	res, err = l.TrySpend(ctx, k, 1)
	require.NoError(t, err)
	require.False(t, res.Local)
	require.True(t, res.OK)

	f.set(down)
	res, err = l.TrySpend(ctx, k, 1)
	require.NoError(t, err)
	require.True(t, res.Local)
	require.False(t, res.OK, "the next outage found the fallback's bucket full again")
	_, res, err = l.TryReserve(ctx, k, 1)
	require.NoError(t, err)
	require.False(t, res.OK)
}

// down returns a client of the shared server whose script calls all fail
// as a reset connection would, before reaching Redis.
func down(t *testing.T) *redis.Client {
	srv := needServer(t)
	var f faults
	f.set(func(int64) fault { return resetBefore })
	return client(t, srv.addr(), &f)
}

// The fallback keeps the local buckets of at most its cap of keys: a new
// key takes the place of one whose bucket is full again, and, where the
// keys it looks at are all in the middle of their limits, is decided as
// without a fallback (ErrUnavailable); no key in the middle of its limit
// loses its state.
func TestFallbackKeysAreCapped(t *testing.T) {
	ctx := context.Background()
	c := down(t)

	// At a rate of 0 a spent bucket never fills again: none can be dropped.
	l, err := rediscredit.New(c, 0, 4, rediscredit.WithFallback(0.5), rediscredit.WithFallbackMaxKeys(8))
	require.NoError(t, err)
	for i := range 8 {
		res, err := l.TrySpend(ctx, fmt.Sprint("k", i), 1)
		require.NoError(t, err)
		require.True(t, res.Local && res.OK)
	}
	for range 100 {
		_, err = l.TrySpend(ctx, "new", 1)
		require.ErrorIs(t, err, rediscredit.ErrUnavailable)
		_, err = l.Spend(ctx, "new", 1)
		require.ErrorIs(t, err, rediscredit.ErrUnavailable)
		_, _, err = l.TryReserve(ctx, "new", 1)
		require.ErrorIs(t, err, rediscredit.ErrUnavailable)
	}
	n, _ := rediscredit.FallbackKeys(l)
	require.Equal(t, 8, n)
	for i := range 8 {
		k := fmt.Sprint("k", i)
		res, err := l.TrySpend(ctx, k, 1)
		require.NoError(t, err)
		require.True(t, res.OK, "%s: the last credit of its local burst of 2", k)
		res, err = l.TrySpend(ctx, k, 1)
		require.NoError(t, err)
		require.False(t, res.OK, "%s: its local bucket was made anew", k)
	}

	// At a high rate a spent bucket is full again at once, and a new key
	// takes its place.
	l, err = rediscredit.New(c, 1e6, 4, rediscredit.WithFallback(0.5), rediscredit.WithFallbackMaxKeys(8))
	require.NoError(t, err)
	for i := range 1000 {
		res, err := l.TrySpend(ctx, fmt.Sprint("k", i), 2)
		require.NoError(t, err)
		require.True(t, res.Local && res.OK, "key %d", i)
		if i%100 == 99 {
			time.Sleep(time.Millisecond) // every bucket full again
		}
	}
	n, _ = rediscredit.FallbackKeys(l)
	require.LessOrEqual(t, n, 8)

	l, err = rediscredit.New(c, 1, 4, rediscredit.WithFallback(0.5))
	require.NoError(t, err)
	_, maxKeys := rediscredit.FallbackKeys(l)
	require.Equal(t, int64(rediscredit.DefaultFallbackMaxKeys), maxKeys)

	_, err = rediscredit.New(c, 1, 4, rediscredit.WithFallback(0.5), rediscredit.WithFallbackMaxKeys(0))
	require.Error(t, err)
	_, err = rediscredit.New(c, 1, 4, rediscredit.WithFallbackMaxKeys(8))
	require.Error(t, err, "a cap on a fallback that is not there")
}

// A key's local bucket takes the Limiter's new rate (its share of it) at
// its next call, as keys in Redis do.
func TestFallbackFollowsSetRate(t *testing.T) {
	ctx := context.Background()
	l, err := rediscredit.New(down(t), 0, 2, rediscredit.WithFallback(1))
	require.NoError(t, err)
	k := key(t)
	res, err := l.TrySpend(ctx, k, 2)
	require.NoError(t, err)
	require.True(t, res.Local && res.OK)
	res, err = l.TrySpend(ctx, k, 1)
	require.NoError(t, err)
	require.False(t, res.OK, "nothing accrues at a rate of 0")

	require.NoError(t, l.SetRate(1e6))
	_, err = l.TrySpend(ctx, k, 1) // takes the new rate
	require.NoError(t, err)
	time.Sleep(time.Millisecond)
	res, err = l.TrySpend(ctx, k, 2)
	require.NoError(t, err)
	require.True(t, res.OK, "the local bucket did not take the new rate")
}

// The fallback's bucket is share of the burst, at least 1 and at most
// atomicsem.MaxPermits: TrySpend of more is refused, and a Spend of more,
// which no wait could cover, is decided as without a fallback.
func TestFallbackBurst(t *testing.T) {
	ctx := context.Background()
	c := down(t)
	l, err := rediscredit.New(c, 1, 10, rediscredit.WithFallback(0.5))
	require.NoError(t, err)
	res, err := l.TrySpend(ctx, key(t), 6)
	require.NoError(t, err)
	require.True(t, res.Local)
	require.False(t, res.OK)
	_, err = l.Spend(ctx, key(t), 6)
	require.ErrorIs(t, err, rediscredit.ErrUnavailable)
	res, err = l.Spend(ctx, key(t), 5)
	require.NoError(t, err)
	require.True(t, res.Local && res.OK)

	l, err = rediscredit.New(c, 1, 10, rediscredit.WithFallback(0.01))
	require.NoError(t, err)
	res, err = l.TrySpend(ctx, key(t), 1)
	require.NoError(t, err)
	require.True(t, res.Local && res.OK, "a local burst of at least 1")

	l, err = rediscredit.New(c, 1000, rediscredit.MaxBurst, rediscredit.WithFallback(1))
	require.NoError(t, err)
	res, err = l.TrySpend(ctx, key(t), 1)
	require.NoError(t, err)
	require.True(t, res.Local && res.OK)
	require.Equal(t, int64(atomicsem.MaxPermits-1), res.Balance)
}

// Redis flaps while four callers spend from one key, rate 1, burst 10,
// WithFallback(0.5): the credit granted by Redis and by the fallback
// together stays within burst + ⌊share·burst⌋ + ⌊(1+share)·rate·w⌋ in
// every window w, however often Redis fails: 1 call in 2, 1 in 10, 1 in
// 100, each failing call reset before or after Redis applied it, or
// answered after its deadline, or not at all.
func TestFlappingFallbackIsBounded(t *testing.T) {
	srv := needServer(t)
	d := faultsDuration(t)
	const rate, burst, share = 1, 10, 0.5
	shapes := []fault{resetBefore, resetAfter, late, unanswered}
	for _, every := range []int64{2, 10, 100} {
		t.Run(fmt.Sprintf("1in%d", every), func(t *testing.T) {
			var f faults
			f.set(func(call int64) fault {
				if call%every != 0 {
					return answered
				}
				return shapes[(call/every)%int64(len(shapes))]
			})
			l, err := rediscredit.New(client(t, srv.addr(), &f), rate, burst, rediscredit.WithFallback(share))
			require.NoError(t, err)
			k := key(t)
			require.NoError(t, client(t, srv.addr()).Del(context.Background(), k).Err())
			grants := flap(t, l, k, 4, d)
			local := 0
			for _, g := range grants {
				if g.local {
					local++
				}
			}
			t.Logf("1 call in %d failing, %v: %d calls, %d credits granted (%d by the fallback), at most %d in one second; bound for one second: %d",
				every, d, f.calls.Load(), len(grants), local, maxIn(grants, time.Second),
				burst+int64(burst*share)+int64(math.Floor((1+share)*rate)))
			checkBound(t, grants, rate, burst, share)
		})
	}
}

// The real network flaps between Redis and one client: a proxy that, every
// few milliseconds, resets every connection, swallows everything, refuses
// connections, delays answers past the deadline, or passes everything. The
// same bound holds.
func TestFlappingNetworkFallbackIsBounded(t *testing.T) {
	srv := needServer(t)
	d := faultsDuration(t)
	const rate, burst, share = 1, 10, 0.5
	p := proxied(t)
	l, err := rediscredit.New(readmeClient(t, p.Addr()), rate, burst, rediscredit.WithFallback(share))
	require.NoError(t, err)
	k := key(t)
	require.NoError(t, client(t, srv.addr()).Del(context.Background(), k).Err())

	stop := make(chan struct{})
	done := make(chan struct{})
	var faultsInjected [5]int
	go func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(5+rng.IntN(20)) * time.Millisecond):
			}
			what := rng.IntN(5)
			faultsInjected[what]++
			switch what {
			case 0:
				p.Reset()
				p.DiscardLate()
			case 1:
				p.BlackHole(true)
				time.Sleep(20 * time.Millisecond)
				p.BlackHole(false)
				p.Reset()
			case 2:
				if err := p.Refuse(true); err != nil {
					t.Error(err)
				}
				p.Reset()
				time.Sleep(20 * time.Millisecond)
				if err := p.Refuse(false); err != nil {
					t.Error(err)
				}
			case 3:
				p.Delay(faultnet.Down, 60*time.Millisecond)
				time.Sleep(20 * time.Millisecond)
				p.Delay(faultnet.Down, 0)
			}
		}
	}()
	grants := flap(t, l, k, 4, d)
	close(stop)
	<-done
	local := 0
	for _, g := range grants {
		if g.local {
			local++
		}
	}
	t.Logf("%v through a flapping proxy (%d resets, %d black holes, %d refusals, %d delays, %d healthy spells): %d credits granted (%d by the fallback), at most %d in one second",
		d, faultsInjected[0], faultsInjected[1], faultsInjected[2], faultsInjected[3], faultsInjected[4],
		len(grants), local, maxIn(grants, time.Second))
	require.Positive(t, local, "the fallback never decided")
	checkBound(t, grants, rate, burst, share)
}

// The fallback's memory is bounded by its cap: 300,000 keys fall back, at
// a rate of 0 so that no local bucket can be dropped, and the heap grows by
// the cap's worth of keys. It runs when $REDISCREDIT_FAULTS is set, and
// logs the bytes per key.
func TestFallbackMemoryIsBounded(t *testing.T) {
	if os.Getenv("REDISCREDIT_FAULTS") == "" {
		t.Skip("set REDISCREDIT_FAULTS to run")
	}
	ctx := context.Background()
	l, err := rediscredit.New(down(t), 0, 10, rediscredit.WithFallback(0.5))
	require.NoError(t, err)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	refused := 0
	for i := range 300_000 {
		_, err := l.TrySpend(ctx, fmt.Sprintf("customer:%08d", i), 1)
		if err != nil {
			require.ErrorIs(t, err, rediscredit.ErrUnavailable)
			refused++
		}
	}
	grown := heap() - before
	n, maxKeys := rediscredit.FallbackKeys(l)
	t.Logf("300,000 keys: %d kept (the cap), %d refused; the heap grew by %.1f MB, %d B per key kept",
		n, refused, float64(grown)/1e6, grown/uint64(n))
	require.Equal(t, int(maxKeys), n)
	require.Equal(t, 300_000-n, refused)
	require.Less(t, grown, uint64(maxKeys)*512, "more than 512 B per key kept")
	runtime.KeepAlive(l)
}
