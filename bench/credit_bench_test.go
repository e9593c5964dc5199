package bench_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	juju "github.com/juju/ratelimit"
	uber "go.uber.org/ratelimit"
	"golang.org/x/time/rate"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credit"
)

// The credit bucket against the rate limiters Go programs use: x/time/rate
// (AllowN, WaitN), juju/ratelimit (TakeAvailable, Wait) and uber-go's
// ratelimit (Take, which only paces and has no non-blocking form, so it
// runs in the Spend rows alone). Each is called through limiter, so the
// dynamic call costs every column the same. The floors are what any
// lock-free bucket must do at least: one compare-and-swap on a counter
// (floor), and that after a read of the monotonic clock (floorclock), the
// least a bucket that must mint can do.

// limiter is what each implementation offers the credit benchmarks.
type limiter interface {
	// trySpend takes n credits if they are there now.
	trySpend(n int64) bool
	// spend takes n credits, waiting for them if it must.
	spend(ctx context.Context, n int64) error
}

type creditLimiter struct{ b *credit.Bucket }

func (l creditLimiter) trySpend(n int64) bool                    { return l.b.TrySpend(n) }
func (l creditLimiter) spend(ctx context.Context, n int64) error { return l.b.Spend(ctx, n) }

type xrateLimiter struct{ l *rate.Limiter }

func (l xrateLimiter) trySpend(n int64) bool { return l.l.AllowN(time.Now(), int(n)) }
func (l xrateLimiter) spend(ctx context.Context, n int64) error {
	return l.l.WaitN(ctx, int(n))
}

type jujuLimiter struct{ b *juju.Bucket }

func (l jujuLimiter) trySpend(n int64) bool { return l.b.TakeAvailable(n) == n }
func (l jujuLimiter) spend(_ context.Context, n int64) error {
	l.b.Wait(n)
	return nil
}

type uberLimiter struct{ l uber.Limiter }

func (l uberLimiter) trySpend(int64) bool { panic("uber-go/ratelimit has no non-blocking take") }
func (l uberLimiter) spend(_ context.Context, n int64) error {
	for range n {
		l.l.Take()
	}
	return nil
}

// floorLimiter is a bare counter taken by compare-and-swap, refilled by
// nothing: the least a lock-free spend can cost.
type floorLimiter struct{ n atomic.Int64 }

func (l *floorLimiter) trySpend(n int64) bool {
	for {
		old := l.n.Load()
		if old < n {
			return false
		}
		if l.n.CompareAndSwap(old, old-n) {
			return true
		}
	}
}
func (l *floorLimiter) spend(_ context.Context, n int64) error {
	l.trySpend(n)
	return nil
}

// floorClockLimiter reads the monotonic clock, as a bucket that must mint
// does, then takes from a counter that is never empty: the least a spend
// that mints can cost.
type floorClockLimiter struct {
	floorLimiter
	epoch time.Time
	last  atomic.Int64
}

func (l *floorClockLimiter) trySpend(n int64) bool {
	l.last.Store(int64(time.Since(l.epoch)))
	l.n.Add(n)
	return l.floorLimiter.trySpend(n)
}

// floorLockLimiter is a counter guarded by a sync.Mutex, with a read of the
// monotonic clock under the lock: the least a bucket costs whose state is
// more than one word, so that a lock guards it, and whose spends take
// their credit in the order of their clock readings, as credit's do.
type floorLockLimiter struct {
	mu    sync.Mutex
	n     int64
	epoch time.Time
	last  int64
}

func (l *floorLockLimiter) trySpend(n int64) bool {
	l.mu.Lock()
	l.last = int64(time.Since(l.epoch))
	ok := l.n >= n
	if ok {
		l.n -= n
	}
	l.mu.Unlock()
	return ok
}

func (l *floorLockLimiter) spend(_ context.Context, n int64) error {
	l.trySpend(n)
	return nil
}

// clockLimiter only reads the monotonic clock: the floor of a spend that
// must know the time, as a bucket without a timer must.
type clockLimiter struct {
	epoch time.Time
	last  int64
}

func (l *clockLimiter) trySpend(int64) bool {
	l.last = int64(time.Since(l.epoch))
	return true
}
func (l *clockLimiter) spend(context.Context, int64) error {
	l.trySpend(1)
	return nil
}

// creditImpl names a limiter and builds one that accrues perSecond credits
// up to burst, starting full, or empty if empty is set.
type creditImpl struct {
	name string
	new  func(perSecond float64, burst int64, empty bool) limiter
}

var creditImpls = []creditImpl{
	{"credit", func(r float64, burst int64, empty bool) limiter {
		var opts []credit.Option
		if empty {
			opts = append(opts, credit.WithInitial(0))
		}
		return creditLimiter{credit.MustNew(r, burst, opts...)}
	}},
	{"xrate", func(r float64, burst int64, empty bool) limiter {
		l := rate.NewLimiter(rate.Limit(r), int(burst))
		if empty {
			l.AllowN(time.Now(), int(burst))
		}
		return xrateLimiter{l}
	}},
	{"juju", func(r float64, burst int64, empty bool) limiter {
		b := juju.NewBucketWithRate(r, burst)
		if empty {
			b.TakeAvailable(burst)
		}
		return jujuLimiter{b}
	}},
	{"uber", func(r float64, _ int64, _ bool) limiter {
		return uberLimiter{uber.New(int(r), uber.WithoutSlack)}
	}},
	{"floor", func(_ float64, burst int64, empty bool) limiter {
		l := new(floorLimiter)
		if !empty {
			l.n.Store(burst)
		}
		return l
	}},
	{"clock", func(float64, int64, bool) limiter {
		return &clockLimiter{epoch: time.Now()}
	}},
	{"floorclock", func(_ float64, burst int64, _ bool) limiter {
		l := &floorClockLimiter{epoch: time.Now()}
		l.n.Store(burst)
		return l
	}},
	{"floorlock", func(_ float64, burst int64, _ bool) limiter {
		return &floorLockLimiter{n: burst, epoch: time.Now()}
	}},
}

func pickCredit(names ...string) []creditImpl {
	var out []creditImpl
	for _, name := range names {
		for _, im := range creditImpls {
			if im.name == name {
				out = append(out, im)
			}
		}
	}
	return out
}

// ample is a burst that no benchmark run spends to the bottom, at a rate
// that adds nothing meanwhile.
const ample = atomicsem.MaxPermits

// BenchmarkCreditTrySpend measures one goroutine taking one credit at a
// time. case=available: the balance always covers it (a full bucket of
// ample credits at one credit a second). case=minting: a bucket of one
// credit at a billion a second, empty, so that every call takes the credit
// that accrued since the last. A credit bucket reads the clock in both, as
// x/time/rate does; clock, the clock read alone, is the floor of that.
func BenchmarkCreditTrySpend(b *testing.B) {
	cases := []struct {
		name  string
		rate  float64
		burst int64
		empty bool
		impls []creditImpl
	}{
		{"available", 1, ample, false, pickCredit("credit", "xrate", "juju", "floor", "clock")},
		{"minting", 1e9, 1, true, pickCredit("credit", "xrate", "juju", "floorclock", "clock")},
	}
	for _, c := range cases {
		for _, im := range c.impls {
			b.Run("case="+c.name+"/impl="+im.name, func(b *testing.B) {
				l := im.new(c.rate, c.burst, c.empty)
				b.ReportAllocs()
				defer measureCPU(b)()
				for i := 0; i < b.N; i++ {
					if !l.trySpend(1) && c.name == "available" {
						b.Fatal("no credit")
					}
				}
			})
		}
	}
}

// BenchmarkCreditTrySpendParallel is case=available of
// BenchmarkCreditTrySpend from GOMAXPROCS goroutines at once: the
// counter's cache line moves between cores. Beside the one-word floor,
// floorclock adds the clock read every bucket without a timer makes, and
// floorlock puts it and the counter under a sync.Mutex, as a bucket of
// more than one word must.
func BenchmarkCreditTrySpendParallel(b *testing.B) {
	for _, im := range pickCredit("credit", "xrate", "juju", "floor", "floorclock", "floorlock") {
		b.Run("case=available/impl="+im.name, func(b *testing.B) {
			l := im.new(1, ample, false)
			b.ReportAllocs()
			defer measureCPU(b)()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !l.trySpend(1) {
						panic("no credit")
					}
				}
			})
		})
	}
}

// BenchmarkCreditSpend measures Spend (WaitN, Take, Wait) with the credit
// there, so that nobody waits: the cost of the blocking call's fast path.
// uber-go's limiter has no burst; at its rate of a billion a second it
// never sleeps either.
func BenchmarkCreditSpend(b *testing.B) {
	for _, im := range pickCredit("credit", "xrate", "juju", "uber", "floor") {
		b.Run("case=nowait/impl="+im.name, func(b *testing.B) {
			r := 1.0
			if im.name == "uber" {
				r = 1e9
			}
			l := im.new(r, ample, false)
			ctx := context.Background()
			b.ReportAllocs()
			defer measureCPU(b)()
			for i := 0; i < b.N; i++ {
				if err := l.spend(ctx, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
