package rediscreditbench_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/credit"
	"github.com/atomicsem/atomicsem/rediscredit"
)

// BenchmarkLease measures one process spending one key's credit, one
// credit per op, from a number of goroutines at once: through a Lease
// (impl=lease: a local pool topped up from Redis in blocks), through the
// Limiter (impl=limiter: one script call per op, the model of redis_rate
// and of a global rate-limit service), and from an in-process
// credit.Bucket (impl=bucket: no fleet at all, the floor a lease's local
// spend is held to). All three keep the same law; the rate is far above
// what the process can spend, so that every op is granted and ns/op is
// the process's cost, not the rate.
//
// roundtrips/kop is the script calls per 1,000 ops (0 for the bucket),
// refused/op the share of ops not granted (0 expected). The lease's pool
// starts empty each run, so its warm-up (a block that doubles while the
// pool is short) is in the figure.
func BenchmarkLease(b *testing.B) {
	srv := needServer(b)
	const rate, burst = 1e9, 1e8
	for _, procs := range []int{1, 16, 64} {
		for _, impl := range []string{"bucket", "lease", "limiter"} {
			b.Run("impl="+impl+"/goroutines="+itoa(procs), func(b *testing.B) {
				var n counter
				c := warmClient(b, srv.addr(), min(procs, 16), &n)
				defer c.Close()
				ctx := context.Background()
				key := "bench:lease:" + impl + ":" + itoa(procs)
				require.NoError(b, c.Del(ctx, key).Err())
				var spend func() (bool, error)
				var closer func()
				switch impl {
				case "bucket":
					bk := credit.MustNew(rate, burst)
					spend = func() (bool, error) { return bk.TrySpend(1), nil }
				case "lease":
					l, err := rediscredit.New(c, rate, burst)
					require.NoError(b, err)
					le, err := l.Lease(key)
					require.NoError(b, err)
					spend = func() (bool, error) { return le.TrySpend(ctx, 1) }
					closer = func() { require.NoError(b, le.Close(ctx)) }
				case "limiter":
					l, err := rediscredit.New(c, rate, burst)
					require.NoError(b, err)
					spend = func() (bool, error) {
						res, err := l.TrySpend(ctx, key, 1)
						return res.OK, err
					}
				}
				runLease(b, procs, spend, &n)
				if closer != nil {
					closer()
				}
			})
		}
	}
}

// runLease runs b.N calls of spend over procs goroutines and reports the
// round trips per 1,000 ops and the share refused.
func runLease(b *testing.B, procs int, spend func() (bool, error), n *counter) {
	var next, refused atomic.Int64
	var wg sync.WaitGroup
	n.n.Store(0)
	b.ResetTimer()
	for range procs {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				ok, err := spend()
				if err != nil {
					b.Error(err)
					return
				}
				if !ok {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(1000*float64(n.n.Load())/float64(b.N), "roundtrips/kop")
	b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
}
