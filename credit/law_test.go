package credit_test

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credit"
)

// From empty, with nothing spent, the balance after t is exactly
// min(burst, ⌊rate·t⌋), at every nanosecond the bucket is looked at, for
// rates whose period is a whole number of nanoseconds and rates whose
// period is not.
func TestBalanceIsExactlyTheAccrual(t *testing.T) {
	tests := []struct {
		rate  string // exact, as a fraction or decimal
		burst int64
		at    []time.Duration
	}{
		{"10", 100, []time.Duration{0, 99_999_999, 100_000_000, time.Second, 9_999_999_999, 10 * time.Second, time.Hour}},
		{"3", 1000, []time.Duration{333_333_333, 333_333_334, 666_666_666, 666_666_667, time.Second, 100*time.Second - 1, 100 * time.Second}},
		{"7.3", 1000, []time.Duration{136_986_301, 136_986_302, 10*time.Second - 1, 10 * time.Second, 100 * time.Second}},
		{"1000000000", atomicsem.MaxPermits, []time.Duration{1, 2, 999, time.Millisecond, time.Second, 2 * time.Second}},
		{"1/3600", 10, []time.Duration{time.Hour - 1, time.Hour, 10*time.Hour - 1, 10 * time.Hour, 1000 * time.Hour}},
		{"1/3", 5, []time.Duration{3*time.Second - 1, 3 * time.Second, 15 * time.Second}},
		{"8388608", 64 << 20, []time.Duration{119, 120, time.Second, 8 * time.Second, 9 * time.Second}},
		{"0.7692307692307693", 3, []time.Duration{1_299_999_999, 1_300_000_000, 13 * time.Second}},
		{"1/31536000", 3, []time.Duration{365 * 24 * time.Hour, 3 * 365 * 24 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run("rate="+tt.rate, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := ratOf(t, tt.rate)
				b := mustNew(t, floatOf(r), tt.burst, credit.WithInitial(0))
				start := time.Now()
				for _, at := range tt.at {
					time.Sleep(at - time.Since(start))
					want := min(tt.burst, accrued(r, at))
					require.Equal(t, want, balance(b), "after %v", at)
				}
			})
		})
	}
}

// Looking at the bucket often or rarely makes no difference: the fraction
// of a credit is kept between looks, so many small mints add up to the
// same as one large one.
func TestFrequentLooksDoNotDrift(t *testing.T) {
	for _, rs := range []string{"3", "7.3", "1/3", "1000000007"} {
		t.Run("rate="+rs, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := ratOf(t, rs)
				burst := largestBurst(r)
				b := mustNew(t, floatOf(r), burst, credit.WithInitial(0))
				start := time.Now()
				step := 7*time.Millisecond + 13 // not a multiple of any period here
				for range 2000 {
					time.Sleep(step)
					want := min(burst, accrued(r, time.Since(start)))
					require.Equal(t, want, balance(b), "after %v", time.Since(start))
				}
			})
		})
	}
}

// Spending keeps the law: what is left is the accrual less what was spent,
// with the fraction intact, as long as the bucket never fills.
func TestSpendingKeepsTheFraction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := ratOf(t, "7.3")
		b := mustNew(t, floatOf(r), 1000, credit.WithInitial(0))
		start := time.Now()
		spent := int64(0)
		for i := range 500 {
			time.Sleep(time.Duration(i%7+1) * 31 * time.Millisecond)
			n := int64(i % 3)
			if b.TrySpend(n) {
				spent += n
			}
			require.Equal(t, accrued(r, time.Since(start))-spent, balance(b), "step %d", i)
		}
		require.Positive(t, spent)
	})
}

// Time spent full is not banked: credit taken out of a full bucket starts
// accrual anew, however long it sat full, and the next credit comes a
// whole period after the spend. The bucket is not looked at while it fills
// and sits full: the spend itself finds it full and applies the ceiling.
func TestTimeSpentFullIsNotBanked(t *testing.T) {
	tests := []struct {
		name  string
		spend func(b *credit.Bucket, n int64)
	}{
		{"TrySpend", func(b *credit.Bucket, n int64) {
			if !b.TrySpend(n) {
				panic("TrySpend failed on a full bucket")
			}
		}},
		{"Forget of a reservation", func(b *credit.Bucket, n int64) {
			tok, ok := b.TryAcquire(n)
			if !ok {
				panic("TryAcquire failed on a full bucket")
			}
			tok.Forget()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := mustNew(t, 10, 10, credit.WithInitial(5))
				time.Sleep(time.Hour) // full after 500ms, then 59.5 minutes full, unlooked at
				tt.spend(b, 5)
				time.Sleep(100*time.Millisecond - 1) // not looked at since the spend either
				require.Equal(t, int64(5), balance(b), "a credit came early: time spent full was banked")
				time.Sleep(time.Nanosecond)
				require.Equal(t, int64(6), balance(b), "accrual did not restart at the spend")
			})
		})
	}
}

// A bucket that fills a moment after it was looked at, and is spent from
// soon after, never holds more than the continuous model (here 5 + 1: full
// at 5µs, 5 spent at 50µs, one more by 51µs), and holds exactly that.
func TestSpendJustAfterFillingMatchesTheModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1e6, 10, credit.WithInitial(5))
		require.Equal(t, int64(5), balance(b))
		time.Sleep(50 * time.Microsecond)
		require.True(t, b.TrySpend(5))
		time.Sleep(time.Microsecond)
		require.Equal(t, int64(6), balance(b))
		time.Sleep(time.Millisecond)
		require.Equal(t, int64(10), balance(b))
	})
}

// A reservation taken from a full bucket keeps it full (reserved credit
// counts against the burst), and accrual starts when the reservation is
// forgotten, not before; released, the credit comes back and the bucket is
// full again.
func TestReservedCreditCountsAgainstTheBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 10, 5)
		tok, ok := b.TryAcquire(3)
		require.True(t, ok)
		time.Sleep(time.Second)
		require.Equal(t, credit.Stats{Balance: 2, Reserved: 3, Burst: 5, Rate: 10}, b.Stats())
		part, ok := tok.Split(1)
		require.True(t, ok)
		part.Forget() // spent: the bucket is no longer full
		time.Sleep(100 * time.Millisecond)
		require.Equal(t, credit.Stats{Balance: 3, Reserved: 2, Burst: 5, Rate: 10}, b.Stats())
		tok.Release()
		require.Equal(t, credit.Stats{Balance: 5, Burst: 5, Rate: 10}, b.Stats())
	})
}

// No overflow at the edges: years of idle time at high rates, the largest
// burst at a tiny rate, and rates beyond a credit a nanosecond.
func TestExtremesDoNotOverflow(t *testing.T) {
	tests := []struct {
		name  string
		rate  float64
		burst int64
		idle  time.Duration
		want  int64
	}{
		{"a billion a second for 200 years", 1e9, atomicsem.MaxPermits, 200 * 365 * 24 * time.Hour, atomicsem.MaxPermits},
		{"a trillion a second for 100 years", 1e12, atomicsem.MaxPermits, 100 * 365 * 24 * time.Hour, atomicsem.MaxPermits},
		{"largest finite rate", math.MaxFloat64, 7, time.Nanosecond, 7},
		{"one an hour, the largest burst within MaxFill, 70 years", 1.0 / 3600, 640_511, 70 * 365 * 24 * time.Hour, 613_200},
		{"tiny rate counts as zero", 1e-10, 3, 100 * 365 * 24 * time.Hour, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := mustNew(t, tt.rate, tt.burst, credit.WithInitial(0))
				time.Sleep(tt.idle)
				require.Equal(t, tt.want, balance(b))
				if tt.want > 0 {
					require.True(t, b.TrySpend(1))
				}
			})
		})
	}
}

// A clock that reads backwards adds nothing: a look at a moment before
// the last one sees the balance of that moment, less, never more, and
// nothing accrued is lost once the clock reads ahead again.
func TestClockReadingBackwardsAddsNothing(t *testing.T) {
	now := int64(0)
	b := credit.NewWithClock(10, 100, 0, func() int64 { return now })
	now = int64(time.Second)
	require.Equal(t, int64(10), balance(b))
	now = int64(500 * time.Millisecond)
	require.Equal(t, int64(5), balance(b))
	require.False(t, b.TrySpend(6))
	now = int64(1100 * time.Millisecond)
	require.Equal(t, int64(11), balance(b))
	now = -int64(time.Hour)
	require.Zero(t, balance(b))
	require.False(t, b.TrySpend(1))
	now = int64(1200 * time.Millisecond)
	require.True(t, b.TrySpend(11))
	require.Equal(t, int64(1), balance(b))
}
