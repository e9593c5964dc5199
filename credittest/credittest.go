// Package credittest is a law suite for credit buckets: the laws that
// package credit's Bucket keeps, checked against any backend that keeps
// credit the same way (in process, or in a server shared by a fleet).
//
// A backend runs the suite from one of its own tests:
//
//	func TestLaws(t *testing.T) {
//		credittest.Run(t, credittest.Config{New: newBucket})
//	}
//
// The laws are checked from the times the backend reports, not from the
// times the suite sleeps, so a backend on a server's clock is checked as
// exactly as one on testing/synctest's fake clock: every observation says
// when the backend made it, and the suite computes what the balance must
// be at that moment. Sleeps only choose which moments get looked at. A
// backend that runs in a synctest bubble says so with Config.InBubble; the
// suite then runs each law in its own bubble, where sleeps cost nothing and
// the moments looked at are exact.
//
// The laws, for a bucket of a rate r (credits per second) and a burst b:
//   - after t from empty, with nothing spent, the balance is min(b, ⌊r·t⌋),
//     and spending keeps the fraction of a credit accrued;
//   - time spent full is not banked: a spend from a full bucket starts
//     accrual anew;
//   - credit reserved counts against the burst, and credit given back never
//     pushes the balance and the reserved credit above the burst;
//   - nothing is minted by races: in every window [a, b] of the backend's
//     clock, the credit spent is at most b + ⌊r·(b−a)⌋;
//   - a change of rate neither loses nor mints credit: the accrual up to the
//     change is at the old rate, and the rest at the new one;
//   - Spend returns once the credit it spends has accrued, and one given up
//     takes nothing.
//
// The suite uses rates whose products with a whole number of microseconds
// are exact in binary floating point (whole numbers), so that a backend
// that computes ⌊r·t⌋ in float64 on a microsecond clock and one that
// computes it exactly on a nanosecond clock owe the same answer.
package credittest

import (
	"context"
	"fmt"
	"math/big"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// Bucket is a credit bucket as the suite drives it. Every method reports
// the time at which the backend decided, on the backend's own clock, as a
// duration since any origin fixed for the bucket's life. An adapter for a
// backend whose calls can fail fails the test (through the *testing.T it was
// made with) on an unexpected error.
type Bucket interface {
	// TrySpend takes n credits if the balance covers them now and reports
	// whether it did.
	TrySpend(n int64) (ok bool, at time.Duration)
	// Spend takes n credits, waiting until they have accrued; at is when
	// the credit it took had accrued. It returns ctx.Err() if ctx is done
	// first.
	Spend(ctx context.Context, n int64) (at time.Duration, err error)
	// TryReserve reserves n credits if the balance covers them now.
	TryReserve(n int64) (r Reservation, ok bool, at time.Duration)
	// Stats reports the balance and the credit reserved.
	Stats() (balance, reserved int64, at time.Duration)
	// SetRate changes the rate.
	SetRate(rate float64) (at time.Duration)
}

// Reservation is credit held by TryReserve until it is settled.
type Reservation interface {
	// Release gives the credit back.
	Release() (at time.Duration)
	// Forget spends the credit.
	Forget() (at time.Duration)
}

// Config describes a backend to the suite.
type Config struct {
	// New returns a full bucket of the rate and the burst, for the test t.
	New func(t *testing.T, rate float64, burst int64) Bucket
	// InBubble says that the backend runs inside a testing/synctest bubble
	// with no goroutine outside it; each law then runs in its own bubble.
	InBubble bool
	// Goroutines is how many goroutines race in the law on races; 8 if 0.
	Goroutines int
	// RaceFor is how long they race, on the backend's clock; 300ms if 0.
	RaceFor time.Duration
}

type law struct {
	name string
	f    func(t *testing.T, c Config)
}

var laws = []law{
	{"AccrualFromEmptyIsExact", accrualFromEmpty},
	{"SpendingKeepsTheFraction", spendingKeepsTheFraction},
	{"TimeSpentFullIsNotBanked", timeSpentFullIsNotBanked},
	{"ForgetFromFullRestartsAccrual", forgetFromFull},
	{"ReservedCreditCountsAgainstTheBurst", reservedCountsAgainstBurst},
	{"SetRateNeitherLosesNorMints", setRateNeitherLosesNorMints},
	{"SetRateOnAFullBucketKeepsItFull", setRateOnFull},
	{"SpendWaitsForAccrual", spendWaitsForAccrual},
	{"SpendGivenUpTakesNothing", spendGivenUp},
	{"RacesMintNothing", racesMintNothing},
}

// Run checks every law against the backend, each as a subtest named after
// it.
func Run(t *testing.T, c Config) {
	if c.Goroutines == 0 {
		c.Goroutines = 8
	}
	if c.RaceFor == 0 {
		c.RaceFor = 300 * time.Millisecond
	}
	for _, l := range laws {
		t.Run(l.name, func(t *testing.T) {
			if c.InBubble {
				synctest.Test(t, func(t *testing.T) { l.f(t, c) })
				return
			}
			l.f(t, c)
		})
	}
}

// Accrued returns ⌊rate·d⌋ computed exactly: the credit that accrues in d
// from nothing at rate credits per second.
func Accrued(rate float64, d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	x := new(big.Rat).SetFloat64(rate)
	x.Mul(x, big.NewRat(int64(d), int64(time.Second)))
	return new(big.Int).Quo(x.Num(), x.Denom()).Int64()
}

// empty returns a bucket emptied by spending its burst, and when.
func empty(t *testing.T, c Config, rate float64, burst int64) (Bucket, time.Duration) {
	b := c.New(t, rate, burst)
	ok, at := b.TrySpend(burst)
	require.True(t, ok, "a new bucket is full: TrySpend(burst) must succeed")
	return b, at
}

// From empty, with nothing spent, the balance after t is min(burst, ⌊r·t⌋)
// at every moment looked at.
func accrualFromEmpty(t *testing.T, c Config) {
	const rate, burst = 100, 8
	b, t0 := empty(t, c, rate, burst)
	for _, d := range []time.Duration{0, 5, 10, 25, 40, 60} {
		time.Sleep(d * time.Millisecond)
		bal, res, at := b.Stats()
		require.Zero(t, res)
		require.Equal(t, min(burst, Accrued(rate, at-t0)), bal, "balance %v after empty", at-t0)
	}
}

// Spending keeps the law: what is left is the accrual less what was spent,
// the fraction intact, while the bucket never fills.
func spendingKeepsTheFraction(t *testing.T, c Config) {
	const rate, burst = 100, 1000
	b, t0 := empty(t, c, rate, burst)
	spent := int64(0)
	for i := range 12 {
		time.Sleep(time.Duration(7+6*(i%3)) * time.Millisecond)
		if ok, _ := b.TrySpend(1); ok {
			spent++
		}
		bal, _, at := b.Stats()
		require.Equal(t, Accrued(rate, at-t0)-spent, bal, "step %d, %v after empty", i, at-t0)
	}
	require.Positive(t, spent)
}

// Credit taken out of a full bucket starts accrual anew, however long it
// sat full: the next credit comes a whole period after the spend.
func timeSpentFullIsNotBanked(t *testing.T, c Config) {
	const rate, burst = 20, 4
	b := c.New(t, rate, burst)
	time.Sleep(120 * time.Millisecond)
	ok, t0 := b.TrySpend(1)
	require.True(t, ok)
	for _, d := range []time.Duration{0, 20, 40} {
		time.Sleep(d * time.Millisecond)
		bal, _, at := b.Stats()
		require.Equal(t, min(burst, burst-1+Accrued(rate, at-t0)), bal,
			"%v after a spend from full: time spent full was banked, or accrual did not restart", at-t0)
	}
}

// A reservation taken from a full bucket keeps it full; forgotten, it is
// spent then, and accrual starts at the Forget.
func forgetFromFull(t *testing.T, c Config) {
	const rate, burst = 20, 4
	b := c.New(t, rate, burst)
	r, ok, _ := b.TryReserve(2)
	require.True(t, ok)
	time.Sleep(100 * time.Millisecond)
	bal, res, _ := b.Stats()
	require.Equal(t, [2]int64{2, 2}, [2]int64{bal, res}, "reserved credit counts against the burst")
	t0 := r.Forget()
	for _, d := range []time.Duration{0, 30, 40} {
		time.Sleep(d * time.Millisecond)
		bal, res, at := b.Stats()
		require.Zero(t, res)
		require.Equal(t, min(burst, 2+Accrued(rate, at-t0)), bal, "%v after the Forget", at-t0)
	}
}

// Reserved credit counts against the burst while it accrues, and credit
// given back never takes the balance and the reserved credit above it.
func reservedCountsAgainstBurst(t *testing.T, c Config) {
	const rate, burst = 20, 5
	b := c.New(t, rate, burst)
	r, ok, _ := b.TryReserve(3)
	require.True(t, ok)
	time.Sleep(100 * time.Millisecond)
	bal, res, _ := b.Stats()
	require.Equal(t, [2]int64{2, 3}, [2]int64{bal, res})
	r.Release()
	bal, res, _ = b.Stats()
	require.Equal(t, [2]int64{5, 0}, [2]int64{bal, res}, "released credit comes back")

	ok, t0 := b.TrySpend(3)
	require.True(t, ok)
	r, ok, _ = b.TryReserve(2)
	require.True(t, ok)
	for _, d := range []time.Duration{0, 60, 100, 200} {
		time.Sleep(d * time.Millisecond)
		bal, res, at := b.Stats()
		require.Equal(t, int64(2), res)
		require.Equal(t, min(burst-2, Accrued(rate, at-t0)), bal, "%v after the spend, 2 reserved", at-t0)
	}
	tr := r.Release()
	bal, res, at := b.Stats()
	require.Zero(t, res)
	require.LessOrEqual(t, bal, int64(burst), "credit given back pushed the balance above the burst")
	want := int64(burst) // full at the Release: the credit given back fills it
	if Accrued(rate, tr-t0) < burst-2 {
		want = min(burst, Accrued(rate, at-t0)+2) // not full: accrual ran on from the spend
	}
	require.Equal(t, want, bal, "%v after the Release", at-tr)
}

// A change of rate settles the accrual up to it at the old rate: the
// balance afterwards lies between the two rates' accruals counted apart
// (the fraction at the change may be dropped) and together (never more).
func setRateNeitherLosesNorMints(t *testing.T, c Config) {
	const burst = 1000
	rates := []float64{50, 200, 10, 0, 100}
	b, t0 := empty(t, c, rates[0], burst)
	spans := []struct {
		rate float64
		d    time.Duration
	}{}
	last := t0
	for i, next := range rates[1:] {
		time.Sleep(time.Duration(23+7*i) * time.Millisecond)
		at := b.SetRate(next)
		spans = append(spans, struct {
			rate float64
			d    time.Duration
		}{rates[i], at - last})
		last = at
	}
	time.Sleep(17 * time.Millisecond)
	bal, _, at := b.Stats()
	spans = append(spans, struct {
		rate float64
		d    time.Duration
	}{rates[len(rates)-1], at - last})
	lo, hi := int64(0), new(big.Rat)
	for _, s := range spans {
		lo += Accrued(s.rate, s.d)
		x := new(big.Rat).SetFloat64(s.rate)
		hi.Add(hi, x.Mul(x, big.NewRat(int64(s.d), int64(time.Second))))
	}
	hiInt := new(big.Int).Quo(hi.Num(), hi.Denom()).Int64()
	require.GreaterOrEqual(t, bal, lo, "a change of rate lost credit accrued before it")
	require.LessOrEqual(t, bal, hiInt, "a change of rate minted credit")
}

// A full bucket stays full across a change of rate, and a spend then
// restarts accrual at the new rate.
func setRateOnFull(t *testing.T, c Config) {
	const burst = 3
	b := c.New(t, 10, burst)
	b.SetRate(40)
	bal, _, _ := b.Stats()
	require.Equal(t, int64(burst), bal)
	ok, t0 := b.TrySpend(2)
	require.True(t, ok)
	time.Sleep(30 * time.Millisecond)
	bal, _, at := b.Stats()
	require.Equal(t, min(burst, 1+Accrued(40, at-t0)), bal)
}

// Spend on a short balance returns once its credit has accrued, and
// leaves the accrual running: the balance afterwards is the accrual less
// what was spent.
func spendWaitsForAccrual(t *testing.T, c Config) {
	const rate, burst = 50, 5
	b, t0 := empty(t, c, rate, burst)
	at, err := b.Spend(context.Background(), 2)
	require.NoError(t, err)
	require.GreaterOrEqual(t, Accrued(rate, at-t0), int64(2), "Spend returned before its credit accrued (%v after empty)", at-t0)
	time.Sleep(10 * time.Millisecond)
	bal, _, now := b.Stats()
	require.Equal(t, min(burst, Accrued(rate, now-t0)-2), bal, "%v after empty, 2 spent", now-t0)
}

// A Spend given up, by its deadline or by cancellation, takes nothing.
func spendGivenUp(t *testing.T, c Config) {
	const rate, burst = 10, 5
	b, t0 := empty(t, c, rate, burst)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	_, err := b.Spend(ctx, 3)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)

	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.Spend(ctx, burst) // due 500ms after empty, long after the cancel
		done <- err
	}()
	time.Sleep(60 * time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	time.Sleep(20 * time.Millisecond)
	bal, _, now := b.Stats()
	require.Equal(t, min(burst, Accrued(rate, now-t0)), bal, "%v after empty: a Spend given up took or minted credit", now-t0)
}

// Goroutines race to spend, reserve and give back; in every window [a, b]
// of the backend's clock the credit spent is at most burst + ⌊r·(b−a)⌋.
// Reserved credit counts as spent when reserved, so a reservation given
// back only makes the check stricter.
func racesMintNothing(t *testing.T, c Config) {
	const rate, burst = 200, 10
	b := c.New(t, rate, burst)
	_, _, start := b.Stats()
	var mu sync.Mutex
	var spends []time.Duration
	var wg sync.WaitGroup
	for g := range c.Goroutines {
		wg.Go(func() {
			var mine []time.Duration
			for i := 0; ; i++ {
				var ok bool
				var at time.Duration
				if (g+i)%4 == 3 {
					var r Reservation
					r, ok, at = b.TryReserve(1)
					if ok {
						if i%2 == 0 {
							r.Release()
							ok = false
						} else {
							r.Forget()
						}
					}
				} else {
					ok, at = b.TrySpend(1)
				}
				if ok {
					mine = append(mine, at)
				}
				if at-start >= c.RaceFor {
					break
				}
				time.Sleep(time.Duration(500+37*g) * time.Microsecond)
			}
			mu.Lock()
			spends = append(spends, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Greater(t, int64(len(spends)), int64(burst), "the racers spent no more than the burst: the check is idle")
	require.NoError(t, CheckWindows(rate, burst, spends))
}

// CheckWindows returns an error if, in some window [a, b] of the times
// given (one per credit spent), more than burst + ⌊rate·(b−a)⌋ credits were
// spent, and nil otherwise. It checks every window that starts and ends at
// a spend, which are the tightest.
func CheckWindows(rate float64, burst int64, spends []time.Duration) error {
	s := append([]time.Duration(nil), spends...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	for i := range s {
		for j := i + int(burst); j < len(s); j++ {
			n := int64(j - i + 1)
			// The float estimate settles all but the windows within a
			// credit of the bound; those are computed exactly.
			if est := rate * (s[j] - s[i]).Seconds(); float64(n-burst) < est-1 {
				continue
			}
			if allowed := burst + Accrued(rate, s[j]-s[i]); n > allowed {
				return fmt.Errorf("credit minted: %d credits spent in [%v, %v], a window of %v, where at most %d accrue on a burst of %d",
					n, s[i], s[j], s[j]-s[i], allowed, burst)
			}
		}
	}
	return nil
}
