//go:build atomicsem_hooks

package atomicsem_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/internal/hook"
)

// With the stripes on, concurrent goroutines that take and return permits
// leave the word alone but for the blocks their stripes draw: the word
// changes (a BeforeCAS site passed) on fewer than one operation in a
// hundred, where a semaphore without the cache changes it twice per
// operation.
func TestPermitCacheKeepsConcurrentAcquiresOffTheWord(t *testing.T) {
	const perG = 20_000
	goroutines := 2 * runtime.GOMAXPROCS(0)
	for _, cache := range []bool{false, true} {
		opts := []atomicsem.Option{}
		if cache {
			opts = append(opts, atomicsem.WithPermitCache())
		}
		s := mustNew(t, bigLimit, bigLimit, opts...)
		var cas atomic.Int64
		restore := hook.Set(func(site hook.Site) {
			if site == hook.BeforeCAS {
				cas.Add(1)
			}
		})
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range perG {
					tok, ok := s.TryAcquire(1)
					if !ok {
						panic("TryAcquire(1) failed far from the limit")
					}
					tok.Release()
				}
			})
		}
		wg.Wait()
		restore()
		perOp := float64(cas.Load()) / float64(goroutines*perG)
		t.Logf("cache %v: %.4f word changes per acquire and release", cache, perOp)
		if cache {
			require.Less(t, perOp, 0.01)
			require.Empty(t, atomicsem.CacheError(s))
		} else {
			require.GreaterOrEqual(t, perOp, 2.0)
		}
		require.Equal(t, atomicsem.Stats{Available: bigLimit, Limit: bigLimit, Max: bigLimit}, s.Stats())
	}
}
