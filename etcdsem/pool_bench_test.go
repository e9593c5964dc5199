package etcdsem_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/etcdsem"
	"github.com/atomicsem/atomicsem/token"
)

// BenchmarkPool measures one process taking and giving back one permit of
// a fleet semaphore of limit 64, from a number of goroutines at once:
// through a Pool (impl=pool: permits leased into the process and served
// by an in-process semaphore), through the Semaphore itself (impl=etcdsem:
// a key per acquire, two round trips), and from an in-process atomicsem
// semaphore (impl=atomicsem: no fleet, the floor a pool's local acquire is
// held to). The limit is at least the goroutines, so nothing waits for a
// permit another holds and ns/op is the process's cost.
//
// rpcs/kop is the unary calls to etcd per 1,000 ops (0 for atomicsem).
// The pool starts empty each run, so its first fetches are in the figure.
func BenchmarkPool(b *testing.B) {
	srv := startServer(b)
	for _, procs := range []int{1, 16, 64} {
		for _, impl := range []string{"atomicsem", "pool", "etcdsem"} {
			b.Run(fmt.Sprintf("impl=%s/goroutines=%d", impl, procs), func(b *testing.B) {
				var rpcs rpcCounter
				h := newHandle(b, srv, fmt.Sprintf("/bench/pool/%s/%d/", impl, procs), 64, 64, handleOpts{rpcs: &rpcs})
				ctx := context.Background()
				var acquire func() (token.Token, error)
				var closer func()
				switch impl {
				case "atomicsem":
					s := atomicsem.MustNew(64, 64)
					acquire = func() (token.Token, error) { return s.Acquire(ctx, 1) }
				case "pool":
					p, err := etcdsem.NewPool(h.Semaphore)
					require.NoError(b, err)
					acquire = func() (token.Token, error) { return p.Acquire(ctx, 1) }
					closer = func() {
						cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
						defer cancel()
						require.NoError(b, p.Close(cctx))
					}
				case "etcdsem":
					acquire = func() (token.Token, error) { return h.Acquire(ctx, 1) }
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				rpcs.calls.Store(0)
				b.ResetTimer()
				for range procs {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							tok, err := acquire()
							if err != nil {
								b.Error(err)
								return
							}
							tok.Release()
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(1000*float64(rpcs.calls.Load())/float64(b.N), "rpcs/kop")
				if closer != nil {
					closer()
				}
			})
		}
	}
}
