package credit_test

// Tests ported from golang.org/x/time/rate's rate_test.go: the behaviour
// each checks there, stated for a Bucket, in fake time. docs/credit.md
// lists which were ported, which were not, and where a Bucket differs by
// design.

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credit"
)

// allow is one step of an AllowN script: at offset at from the start,
// TrySpend(n) must report ok.
type allow struct {
	at time.Duration
	n  int64
	ok bool
}

func runAllows(t *testing.T, b *credit.Bucket, steps []allow) {
	t.Helper()
	start := time.Now()
	for i, s := range steps {
		time.Sleep(s.at - time.Since(start))
		require.Equal(t, s.ok, b.TrySpend(s.n), "step %d: TrySpend(%d) at %v", i, s.n, s.at)
	}
}

const d = 100 * time.Millisecond // one credit at 10 per second

// TestLimiterBurst1 and TestLimiterBurst3.
func TestXRateBursts(t *testing.T) {
	t.Run("burst=1", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			runAllows(t, mustNew(t, 10, 1), []allow{
				{0, 1, true}, {0, 1, false}, {0, 1, false},
				{d, 1, true}, {d, 1, false}, {d, 1, false},
				{2 * d, 2, false}, // more than the burst always fails
				{2 * d, 1, true}, {2 * d, 1, false},
			})
		})
	})
	t.Run("burst=3", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			runAllows(t, mustNew(t, 10, 3), []allow{
				{0, 2, true}, {0, 2, false}, {0, 1, true}, {0, 1, false},
				{d, 4, false},
				{2 * d, 1, true}, {3 * d, 1, true}, {4 * d, 1, true}, {4 * d, 1, true}, {4 * d, 1, false},
				{9 * d, 3, true}, {9 * d, 0, true},
			})
		})
	})
}

// TestLimiter_noTruncationErrors: a rate whose period is not a whole
// number of nanoseconds (10/13 per second) starts full and allows at once.
func TestXRateNoTruncationErrors(t *testing.T) {
	b := mustNew(t, 0.7692307692307693, 1)
	require.True(t, b.TrySpend(1))
	num, den, _ := credit.Ratio(0.7692307692307693)
	require.Equal(t, []uint64{1, 1_300_000_000}, []uint64{num, den}, "held as exactly 10/13 per second")
}

// TestSimultaneousRequests: of many goroutines asking at once, exactly the
// burst succeed while the rate adds nothing meanwhile.
func TestXRateSimultaneousRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1, 5)
		var ok atomic.Int32
		var wg sync.WaitGroup
		for range 15 {
			wg.Go(func() {
				if b.TrySpend(1) {
					ok.Add(1)
				}
			})
		}
		wg.Wait()
		require.Equal(t, int32(5), ok.Load())
	})
}

// TestLongRunningQPS: offered 500 requests a second for 5 seconds, a
// bucket of 100 per second with a burst of 100 allows the burst plus the
// accrual: the last request, at 4.998 s, finds ⌊100·4.998⌋ credits
// accrued since the first. x/time/rate's test allows 0.1% slack below and
// one above its ideal of 600; fake time and exact accrual allow none.
func TestXRateLongRunningQPS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 100, 100)
		ok := 0
		start := time.Now()
		for time.Since(start) < 5*time.Second {
			if b.TrySpend(1) {
				ok++
			}
			time.Sleep(2 * time.Millisecond)
		}
		require.Equal(t, 100+499, ok)
	})
}

// TestSimpleReserve, TestCancelLast and TestReserveSetLimitCancel:
// reserving more than the balance waits for the accrual, and credit
// reserved and given back is there again at once. (Unlike x/time/rate's
// reservations, reserved credit counts against the burst until it is
// settled, so the first reservation is settled before the second waits.)
func TestXRateReserveAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 10, 2)
		ctx := context.Background()
		start := time.Now()
		first, err := b.Acquire(ctx, 2)
		require.NoError(t, err)
		require.Zero(t, time.Since(start))
		first.Forget()
		second, err := b.Acquire(ctx, 2)
		require.NoError(t, err)
		require.Equal(t, 2*d, time.Since(start))
		second.Release() // cancelled: both back
		third, err := b.Acquire(ctx, 2)
		require.NoError(t, err)
		require.Equal(t, 2*d, time.Since(start), "the returned credit was there at once")
		third.Forget()
	})
}

// TestReserveSetLimit: after a rate change the accrual already due stays,
// and the rest comes at the new rate.
func TestXRateSetRateKeepsAccrual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 5, 2)
		require.True(t, b.TrySpend(2))
		start := time.Now()
		time.Sleep(2 * d) // one credit at 5/s
		require.NoError(t, b.SetRate(10))
		require.NoError(t, b.Spend(context.Background(), 2))
		require.Equal(t, 3*d, time.Since(start))
	})
}

// TestWaitSimple: a done context fails at once; more than the burst fails
// at once; what the balance covers goes at once; the rest waits for
// exactly its accrual.
func TestXRateWaitSimple(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 10, 3)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, b.Spend(ctx, 1), context.Canceled)
		require.ErrorIs(t, b.Spend(context.Background(), 4), atomicsem.ErrExceedsMax)
		start := time.Now()
		require.NoError(t, b.Spend(context.Background(), 2))
		require.Zero(t, time.Since(start))
		require.NoError(t, b.Spend(context.Background(), 3))
		require.Equal(t, 2*d, time.Since(start))
	})
}

// TestWaitCancel: a wait cancelled part-way spends nothing, and what
// accrued while it waited is there for the next caller.
func TestXRateWaitCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 10, 3)
		require.NoError(t, b.Spend(context.Background(), 2))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(d, cancel)
		start := time.Now()
		require.ErrorIs(t, b.Spend(ctx, 3), context.Canceled)
		require.Equal(t, d, time.Since(start))
		require.NoError(t, b.Spend(context.Background(), 2))
		require.Equal(t, d, time.Since(start), "1 left + 1 accrued, at once")
	})
}

// TestWaitTimeout differs by design: x/time/rate fails at once when the
// deadline is nearer than the wait it predicts; a Bucket cannot predict
// credit given back by reservations, so it waits until the deadline.
func TestXRateWaitTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 10, 3)
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		require.NoError(t, b.Spend(ctx, 2))
		start := time.Now()
		require.ErrorIs(t, b.Spend(ctx, 3), context.DeadlineExceeded)
		require.Equal(t, d, time.Since(start))
	})
}

// TestWaitInf differs by design: with an infinite rate a Bucket still
// refuses more than its burst, where x/time/rate allows any n; within the
// burst it never waits.
func TestXRateWaitInf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, math.Inf(1), 3)
		start := time.Now()
		for range 100 {
			require.NoError(t, b.Spend(context.Background(), 3))
		}
		require.Zero(t, time.Since(start))
		require.ErrorIs(t, b.Spend(context.Background(), 4), atomicsem.ErrExceedsMax)
	})
}

// TestZeroLimit and TestSetAfterZeroLimit: a zero rate starts full and
// never refills; raised, the next credit comes a period later.
func TestXRateZeroRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 0, 1)
		require.True(t, b.TrySpend(1))
		time.Sleep(time.Hour)
		require.False(t, b.TrySpend(1))
		require.NoError(t, b.SetRate(10))
		start := time.Now()
		require.NoError(t, b.Spend(context.Background(), 1))
		require.Equal(t, d, time.Since(start))
	})
}

// TestTinyLimit (golang/go#71154): a tiny rate with a small burst allows
// the burst and nothing more, with no overflow in the waits it implies.
func TestXRateTinyRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1e-10, 1)
		require.True(t, b.TrySpend(1))
		require.False(t, b.TrySpend(1))
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		require.ErrorIs(t, b.Spend(ctx, 1), context.DeadlineExceeded)
	})
}
