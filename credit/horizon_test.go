package credit_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credit"
)

// A burst that takes MaxFill or longer to accrue is refused, by every
// constructor and by a change of rate, rather than make a bucket that
// starts short of full and whose Spend of the burst never returns. The
// refusal changes nothing; the largest burst within MaxFill is accepted.
func TestBurstBeyondTheClocksReachIsRefused(t *testing.T) {
	const tiny = 1e-5 // a burst of MaxPermits takes 3.4 million years
	_, err := credit.New(tiny, atomicsem.MaxPermits)
	require.ErrorIs(t, err, credit.ErrInvalidBurst)
	require.ErrorContains(t, err, "MaxFill")
	_, err = credit.NewConfig(tiny, atomicsem.MaxPermits)
	require.ErrorIs(t, err, credit.ErrInvalidBurst)

	b := mustNew(t, 1, atomicsem.MaxPermits)
	require.True(t, b.TrySpend(10))
	require.ErrorIs(t, b.SetRate(tiny), credit.ErrInvalidRate)
	require.Equal(t, 1.0, b.Stats().Rate, "a refused SetRate changed the rate")
	c := credit.MustConfig(1, atomicsem.MaxPermits)
	_, err = c.WithRate(tiny)
	require.ErrorIs(t, err, credit.ErrInvalidRate)

	for _, rs := range []string{"1/100000", "1/3600", "1/3", "7/60"} {
		r := ratOf(t, rs)
		k := largestBurst(r)
		_, err := credit.New(floatOf(r), k)
		require.NoError(t, err, "rate %s, burst %d", rs, k)
		_, err = credit.New(floatOf(r), k+1)
		require.ErrorIs(t, err, credit.ErrInvalidBurst, "rate %s, burst %d", rs, k+1)
	}
}

// At the extremes of rate × burst a new bucket is full, the zero State is
// full, and a Spend of the whole burst from empty returns at exactly the
// moment the burst has accrued: from bursts that take decades to fill to
// rates of a thousand credits a nanosecond.
func TestExtremesOfRateAndBurst(t *testing.T) {
	tests := []struct {
		rate  string
		burst int64
	}{
		{"1/100000", 0}, // 0: the largest burst within MaxFill
		{"1/3600", 0},
		{"1/3", 0},
		{"7/60", 0},
		{"1", atomicsem.MaxPermits},
		{"1000000000", atomicsem.MaxPermits},
		{"1000000000000", atomicsem.MaxPermits},
		{"1/100000", 1},
	}
	for _, tt := range tests {
		r := ratOf(t, tt.rate)
		burst := tt.burst
		if burst == 0 {
			burst = largestBurst(r)
		}
		t.Run(fmt.Sprintf("rate=%s/burst=%d", tt.rate, burst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := credit.MustConfig(floatOf(r), burst)
				var s credit.State
				require.Equal(t, burst, s.Balance(c, c.Now()), "the zero State is full")

				b := mustNew(t, floatOf(r), burst)
				require.Equal(t, burst, balance(b), "a new bucket is full")
				require.True(t, b.TrySpend(burst))
				start := time.Now()
				require.NoError(t, b.Spend(context.Background(), burst))
				require.Equal(t, fillTime(r, burst), time.Since(start), "Spend(burst) from empty")
				// What accrued between the moment the burst was there and the
				// whole nanosecond is the bucket's: a fraction of a credit at
				// most rates, hundreds at a thousand a nanosecond.
				require.Equal(t, accrued(r, time.Since(start))-burst, balance(b))
			})
		})
	}
	t.Run("rate=+Inf", func(t *testing.T) {
		b := mustNew(t, math.Inf(1), atomicsem.MaxPermits)
		for range 3 {
			require.True(t, b.TrySpend(atomicsem.MaxPermits))
		}
	})
	t.Run("rate=0", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := mustNew(t, 0, atomicsem.MaxPermits)
			require.True(t, b.TrySpend(atomicsem.MaxPermits))
			time.Sleep(100 * 365 * 24 * time.Hour)
			require.Zero(t, balance(b))
		})
	})
}

// The k-th credit of a stream of waiting spends from empty accrues at
// exactly k/rate, and each Spend returns at the first whole nanosecond at
// or after it: no rounding accumulates, however the period falls between
// nanoseconds, including on a bucket that each credit fills.
func TestPacingDoesNotDrift(t *testing.T) {
	for _, rs := range []string{"7/60", "1/3", "10/13", "1000000000/7", "7.3"} {
		for _, burst := range []int64{1, 3} {
			t.Run(fmt.Sprintf("rate=%s/burst=%d", rs, burst), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					r := ratOf(t, rs)
					b := mustNew(t, floatOf(r), burst, credit.WithInitial(0))
					start := time.Now()
					for k := int64(1); k <= 50; k++ {
						require.NoError(t, b.Spend(context.Background(), 1))
						require.Equal(t, fillTime(r, k), time.Since(start), "credit %d", k)
					}
				})
			})
		}
	}
}

// The State's own arithmetic keeps the same pace: the k-th credit taken
// with TrySpendSince by a caller that looked at the whole nanosecond after
// each accrued is taken at exactly k/rate.
func TestTrySpendSinceKeepsThePace(t *testing.T) {
	r := ratOf(t, "7/60")
	c := credit.MustConfig(floatOf(r), 1)
	base := c.Now()
	var s credit.State
	require.True(t, s.TrySpend(c, base, 1))
	since := base
	for k := int64(1); k <= 20; k++ {
		d, ok := s.Wait(c, since, 1)
		require.True(t, ok)
		now := since + int64(d)
		require.Equal(t, base+int64(fillTime(r, k)), now, "credit %d is due", k)
		require.True(t, s.TrySpendSince(c, since, now, 1), "credit %d", k)
		since = now
	}
}
