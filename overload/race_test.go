package overload_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/overload"
	"github.com/atomicsem/atomicsem/token"
)

// TestConcurrentAdmissionsKeepTheLimitAndCeilings runs goroutines that
// acquire random classes and sizes, some cancelled by short timeouts, some
// with TryAcquire, on real time, and counts the permits held from the
// holders' side: each adds its permits after its acquire returns and takes
// them away before it releases, so the counts never exceed what the gate
// has admitted. Neither the total nor the capped class may ever exceed
// the limit or the ceiling, and the gate must end empty.
func TestConcurrentAdmissionsKeepTheLimitAndCeilings(t *testing.T) {
	const limit = 8
	g := overload.MustNew(limit, limit, []overload.Class{
		{Name: "a", Share: 0.25},
		{Name: "b", Share: 0.25},
		{Name: "c", MaxShare: 0.5},
	}, overload.WithMaxQueue(6), overload.WithCoDel(20*time.Microsecond, 200*time.Microsecond),
		overload.WithStarvationBound(100*time.Microsecond))
	var total, capped atomic.Int64
	iterations := 3000
	if testing.Short() {
		iterations = 500
	}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range iterations {
				c, n := rng.IntN(3), int64(1+rng.IntN(2))
				var (
					tok token.Token
					ok  bool
				)
				if rng.IntN(8) == 0 {
					tok, ok = g.TryAcquire(c, n)
				} else {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(200))*time.Microsecond)
					var err error
					tok, err = g.Acquire(ctx, c, n)
					cancel()
					ok = err == nil
				}
				if !ok {
					continue
				}
				if v := total.Add(n); v > limit {
					t.Errorf("%d permits held, limit %d", v, limit)
				}
				if c == 2 {
					if v := capped.Add(n); v > limit/2 {
						t.Errorf("class c holds %d, ceiling %d", v, limit/2)
					}
				}
				runtime.Gosched()
				if c == 2 {
					capped.Add(-n)
				}
				total.Add(-n)
				tok.Release()
			}
		})
	}
	wg.Wait()
	st := g.Stats()
	require.Equal(t, int64(0), st.Held)
	require.Equal(t, 0, st.Waiters)
}

// TestConcurrentLimitChangesLoseNothing moves the limit up and down while
// goroutines acquire and release, and checks that every waiter ends (no
// lost wake-up) and the gate ends empty, with the permits held never above
// the largest limit.
func TestConcurrentLimitChangesLoseNothing(t *testing.T) {
	const max = 6
	g := overload.MustNew(1, max, classes(0.3, 0.3, 0))
	var total atomic.Int64
	iterations := 2000
	if testing.Short() {
		iterations = 300
	}
	stop := make(chan struct{})
	var mover sync.WaitGroup
	mover.Go(func() {
		rng := rand.New(rand.NewPCG(9, 9))
		for {
			select {
			case <-stop:
				require.NoError(t, g.SetLimit(max))
				return
			default:
			}
			require.NoError(t, g.SetLimit(int64(rng.IntN(max+1))))
			runtime.Gosched()
		}
	})
	var wg sync.WaitGroup
	for w := range 5 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for range iterations {
				tok, err := g.Acquire(context.Background(), rng.IntN(3), 1)
				require.NoError(t, err)
				if v := total.Add(1); v > max {
					t.Errorf("%d held, above the largest limit %d", v, max)
				}
				runtime.Gosched()
				total.Add(-1)
				tok.Release()
			}
		})
	}
	wg.Wait()
	close(stop)
	mover.Wait()
	st := g.Stats()
	require.Equal(t, int64(0), st.Held)
	require.Equal(t, 0, st.Waiters)
}

// TestNoOverAdmissionUnderContention has goroutines, one per CPU and a few
// more, take and return permits of a limit of 2 as fast as they can, and
// checks that the holders never count more than the limit. An admission
// that checked the word on one load and counted its permits in another
// step (the check-then-act of Netflix's partitioned limiter) lets two
// arrivals that loaded the same word both in; here that happens thousands
// of times a second on two cores.
func TestNoOverAdmissionUnderContention(t *testing.T) {
	g := overload.MustNew(2, 2, classes(0.5, 0))
	var held, over atomic.Int64
	deadline := time.Now().Add(300 * time.Millisecond)
	if testing.Short() {
		deadline = time.Now().Add(50 * time.Millisecond)
	}
	var wg sync.WaitGroup
	for w := range runtime.GOMAXPROCS(0) + 2 {
		wg.Go(func() {
			ctx := context.Background()
			for i := 0; time.Now().Before(deadline); i++ {
				// Acquire only when nobody waits, so that every admission
				// is a fast path's.
				var tok token.Token
				var ok bool
				if i%2 == 0 && g.Held() < 2 {
					var err error
					tok, err = g.Acquire(ctx, (w+i)%2, 1)
					ok = err == nil
				} else {
					tok, ok = g.TryAcquire((w+i)%2, 1)
				}
				if !ok {
					continue
				}
				if held.Add(1) > 2 {
					over.Add(1)
				}
				held.Add(-1)
				tok.Release()
			}
		})
	}
	wg.Wait()
	require.Zero(t, over.Load(), "admissions above the limit")
	require.Equal(t, int64(0), g.Held())
}
