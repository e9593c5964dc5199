package bench_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/atomicsem/atomicsem/credit"
)

// BenchmarkCreditNew measures making one bucket of a rate and burst known
// before: credit's Config.New and New (which shares the Config of the
// bucket it made last), against rate.NewLimiter.
func BenchmarkCreditNew(b *testing.B) {
	cfg := credit.MustConfig(10, 100)
	impls := []struct {
		name string
		new  func() any
	}{
		{"credit-config", func() any { return cfg.MustNew() }},
		{"credit", func() any { return credit.MustNew(10, 100) }},
		{"xrate", func() any { return rate.NewLimiter(10, 100) }},
	}
	for _, im := range impls {
		b.Run("case=known/impl="+im.name, func(b *testing.B) {
			b.ReportAllocs()
			defer measureCPU(b)()
			for i := 0; i < b.N; i++ {
				sink = im.new()
			}
		})
	}
}

var sink any

// manyKeys is the number of buckets in BenchmarkCreditMillionBuckets.
const manyKeys = 1_000_000

// keyedImpl keeps manyKeys buckets the way a caller with a bucket per key
// would, with the keys as indexes so that no map cost is counted.
type keyedImpl struct {
	name string
	// make returns the store; first makes bucket i and spends one credit
	// from it; again spends one more.
	make         func() any
	first, again func(store any, i int) bool
}

var keyedImpls = []keyedImpl{
	{
		name: "credit",
		make: func() any { return make([]*credit.Bucket, manyKeys) },
		first: func(s any, i int) bool {
			bs := s.([]*credit.Bucket)
			bs[i] = credit.MustNew(10, 100)
			return bs[i].TrySpend(1)
		},
		again: func(s any, i int) bool { return s.([]*credit.Bucket)[i].TrySpend(1) },
	},
	{
		name: "credit-state",
		make: func() any { return &stateStore{cfg: credit.MustConfig(10, 100), s: make([]credit.State, manyKeys)} },
		first: func(s any, i int) bool {
			st := s.(*stateStore)
			return st.s[i].TrySpend(st.cfg, st.cfg.Now(), 1)
		},
		again: func(s any, i int) bool {
			st := s.(*stateStore)
			return st.s[i].TrySpend(st.cfg, st.cfg.Now(), 1)
		},
	},
	{
		name: "xrate",
		make: func() any { return make([]*rate.Limiter, manyKeys) },
		first: func(s any, i int) bool {
			ls := s.([]*rate.Limiter)
			ls[i] = rate.NewLimiter(10, 100)
			return ls[i].Allow()
		},
		again: func(s any, i int) bool { return s.([]*rate.Limiter)[i].Allow() },
	},
}

// stateStore is the leanest per-key store: one shared Config and a State
// per key.
type stateStore struct {
	cfg *credit.Config
	s   []credit.State
}

// BenchmarkCreditMillionBuckets makes a million buckets, spending one
// credit from each as it is made, then spends from each again, as a
// limiter with a bucket per key does. It reports ns/first (make and first
// spend, per key), ns/again (the second spend, per key) and B/key (the
// heap the store and its buckets hold, per key: a pointer and the bucket,
// or the State itself). ns/op is the whole round and means nothing on its
// own.
func BenchmarkCreditMillionBuckets(b *testing.B) {
	for _, im := range keyedImpls {
		b.Run("keys=1000000/impl="+im.name, func(b *testing.B) {
			var first, again time.Duration
			var heap uint64
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				store := im.make()
				start := time.Now()
				for i := range manyKeys {
					if !im.first(store, i) {
						b.Fatal("a full bucket refused its first credit")
					}
				}
				first += time.Since(start)
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap += after.HeapAlloc - before.HeapAlloc
				start = time.Now()
				for i := range manyKeys {
					if !im.again(store, i) {
						b.Fatal("a bucket refused its second credit")
					}
				}
				again += time.Since(start)
				runtime.KeepAlive(store)
			}
			keys := float64(b.N) * manyKeys
			b.ReportMetric(float64(first.Nanoseconds())/keys, "ns/first")
			b.ReportMetric(float64(again.Nanoseconds())/keys, "ns/again")
			b.ReportMetric(float64(heap)/keys, "B/key")
		})
	}
}

// BenchmarkCreditPacing shapes a stream to a rate with a burst of 1: one
// goroutine calls Spend(1) (x/time/rate: Wait) in a loop for a second's
// worth of credit, and the benchmark reports the rate it achieved
// (credits/s) and that as a share of the rate (pct). Each round takes a
// second of wall time; run it with -benchtime 1x.
func BenchmarkCreditPacing(b *testing.B) {
	for _, r := range []int{100, 1000, 10_000} {
		for _, name := range []string{"credit", "xrate"} {
			b.Run("rate="+strconv.Itoa(r)+"/impl="+name, func(b *testing.B) {
				var spent int
				var elapsed time.Duration
				ctx := context.Background()
				for range b.N {
					var spend func() error
					if name == "credit" {
						bk := credit.MustNew(float64(r), 1)
						spend = func() error { return bk.Spend(ctx, 1) }
					} else {
						l := rate.NewLimiter(rate.Limit(r), 1)
						spend = func() error { return l.Wait(ctx) }
					}
					// The collector is done with what earlier benchmarks
					// left (a million buckets), so that it does not run
					// during this one. The first credit is the full
					// bucket's; the clock starts when it is spent.
					runtime.GC()
					if err := spend(); err != nil {
						b.Fatal(err)
					}
					start := time.Now()
					for range r {
						if err := spend(); err != nil {
							b.Fatal(err)
						}
					}
					elapsed += time.Since(start)
					spent += r
				}
				achieved := float64(spent) / elapsed.Seconds()
				b.ReportMetric(achieved, "credits/s")
				b.ReportMetric(100*achieved/float64(r), "pct")
			})
		}
	}
}
