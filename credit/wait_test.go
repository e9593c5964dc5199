package credit_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/credit"
)

// pending is a Spend running in its own goroutine.
type pending struct {
	done chan struct{}
	err  error     // valid once done is closed
	at   time.Time // when it returned; valid once done is closed
}

func goSpend(ctx context.Context, b *credit.Bucket, n int64) *pending {
	p := &pending{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.err = b.Spend(ctx, n)
		p.at = time.Now()
	}()
	return p
}

func (p *pending) returned() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// The waiter at the front wakes exactly when its credit has accrued, to
// the nanosecond, for periods that are and are not whole nanoseconds.
func TestHeadWaiterWakesExactlyWhenCreditIsThere(t *testing.T) {
	tests := []struct {
		rate float64
		n    int64
		want time.Duration
	}{
		{10, 3, 300 * time.Millisecond},
		{3, 1, 333_333_334},
		{3, 3, time.Second},
		{7.3, 73, 10 * time.Second},
		{1e9, 1_000_000, time.Millisecond},
		{1.0 / 3600, 2, 2 * time.Hour},
	}
	for _, tt := range tests {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// A burst above n, so that the waiter's credit comes
				// before the bucket is full.
				b := mustNew(t, tt.rate, 2*tt.n, credit.WithInitial(0))
				start := time.Now()
				require.NoError(t, b.Spend(context.Background(), tt.n))
				require.Equal(t, tt.want, time.Since(start))
				require.Zero(t, balance(b))
			})
		})
	}
}

// Waiters are served in arrival order, a large request ahead of small ones
// holding them back (and holding back TrySpend), each when the credit for
// everyone ahead of it and for itself has accrued.
func TestWaitersAreServedInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 10, 10, credit.WithInitial(0))
		start := time.Now()
		var order []int
		var mu sync.Mutex
		wants := []int64{5, 1, 3, 1}
		var ps []*pending
		for i, n := range wants {
			p := goSpend(context.Background(), b, n)
			ps = append(ps, p)
			synctest.Wait() // queued before the next arrives
			go func() {
				<-p.done
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
			}()
		}
		time.Sleep(200 * time.Millisecond)
		require.Equal(t, int64(2), balance(b), "two credits accrued, short of the first waiter's 5")
		require.False(t, b.TrySpend(1), "TrySpend overtook a waiter")
		_, ok := b.TryAcquire(1)
		require.False(t, ok, "TryAcquire overtook a waiter")
		require.Equal(t, 4, b.Stats().Waiters)
		for _, p := range ps {
			<-p.done
			require.NoError(t, p.err)
		}
		synctest.Wait()
		require.Equal(t, []int{0, 1, 2, 3}, order)
		want := []time.Duration{500, 600, 900, 1000} // cumulative credits at 10/s
		for i, p := range ps {
			require.Equal(t, want[i]*time.Millisecond, p.at.Sub(start), "waiter %d", i)
		}
		require.Equal(t, credit.Stats{Burst: 10, Rate: 10}, b.Stats())
	})
}

// A waiter whose context ends leaves the line at once, its timer stopped,
// and the waiters behind it move up and are served on time.
func TestCancelledHeadWakesFollowers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 10, 10, credit.WithInitial(0))
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		head := goSpend(ctx, b, 8)
		synctest.Wait()
		next := goSpend(context.Background(), b, 2)
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		cancel()
		synctest.Wait()
		require.True(t, head.returned())
		require.ErrorIs(t, head.err, context.Canceled)
		<-next.done
		require.NoError(t, next.err)
		require.Equal(t, 200*time.Millisecond, next.at.Sub(start))
		require.Equal(t, credit.Stats{Burst: 10, Rate: 10}, b.Stats())
	})
}

// A deadline that passes first ends the wait with the context's error, and
// the credit accrued meanwhile stays in the bucket.
func TestDeadlineEndsTheWaitAndKeepsTheCredit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 10, 10, credit.WithInitial(0))
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := b.Spend(ctx, 5)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 250*time.Millisecond, time.Since(start))
		require.Equal(t, int64(2), balance(b))
	})
}

// A rate change while a waiter waits takes effect at once: the accrual up
// to the change is settled at the old rate, the rest at the new one, and
// the waiter re-arms its timer for the new moment.
func TestRateChangeMidWait(t *testing.T) {
	tests := []struct {
		name  string
		after time.Duration // when the rate changes
		rate  float64       // the new rate
		want  time.Duration // when the Spend of 10 returns
	}{
		{"faster", 500 * time.Millisecond, 100, 550 * time.Millisecond}, // 5 by 500ms, 5 more at 100/s
		{"slower", 500 * time.Millisecond, 1, 5500 * time.Millisecond},  // 5 by 500ms, 5 more at 1/s
		{"fraction carries", 550 * time.Millisecond, 20, 775 * time.Millisecond},
		{"from zero", 0, 0, 0}, // no change: plain
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// A burst above the request, so that the waiter's credit
				// comes before the bucket is full.
				b := mustNew(t, 10, 20, credit.WithInitial(0))
				start := time.Now()
				p := goSpend(context.Background(), b, 10)
				if tt.after > 0 {
					time.Sleep(tt.after)
					require.NoError(t, b.SetRate(tt.rate))
				}
				<-p.done
				require.NoError(t, p.err)
				want := tt.want
				if tt.after == 0 {
					want = time.Second
				}
				require.Equal(t, want, p.at.Sub(start))
			})
		})
	}
}

// A zero rate accrues nothing, and a waiter on it waits until the rate is
// raised, then exactly the new period.
func TestWaiterOnZeroRateWaitsForSetRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 0, 1)
		require.True(t, b.TrySpend(1))
		p := goSpend(context.Background(), b, 1)
		time.Sleep(time.Hour)
		require.False(t, p.returned())
		start := time.Now()
		require.NoError(t, b.SetRate(10))
		<-p.done
		require.NoError(t, p.err)
		require.Equal(t, 100*time.Millisecond, p.at.Sub(start))
	})
}

// Credit given back by a reservation serves the waiter at the front at
// once, without waiting for its timer.
func TestReturnedCreditServesTheWaiterAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1, 10)
		tok, err := b.Acquire(context.Background(), 8)
		require.NoError(t, err)
		require.True(t, b.TrySpend(2))
		start := time.Now()
		p := goSpend(context.Background(), b, 6)
		time.Sleep(time.Minute)
		require.False(t, p.returned(), "with 8 reserved, accrual stops at 2")
		require.Equal(t, credit.Stats{Balance: 2, Reserved: 8, Burst: 10, Rate: 1, Waiters: 1}, b.Stats())
		part, _ := tok.Split(3)
		part.Forget() // 3 spent: accrual restarts, the waiter re-arms
		time.Sleep(time.Second)
		require.False(t, p.returned())
		tok.Release() // 5 back: 2 + 1 accrued + 5 ≥ 6
		synctest.Wait()
		require.True(t, p.returned())
		require.NoError(t, p.err)
		require.Equal(t, time.Minute+time.Second, p.at.Sub(start))
		require.Equal(t, credit.Stats{Balance: 2, Burst: 10, Rate: 1}, b.Stats())
	})
}

// Reserve then settle: Acquire waits like Spend; the token splits, part is
// spent, the rest returned; Stats tells the reserved credit throughout,
// and the balance is exact at every step.
func TestReserveThenSettleWithSplit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 10, 20, credit.WithInitial(5))
		start := time.Now()
		tok, err := b.Acquire(context.Background(), 10)
		require.NoError(t, err)
		require.Equal(t, 500*time.Millisecond, time.Since(start))
		require.Equal(t, credit.Stats{Balance: 0, Reserved: 10, Burst: 20, Rate: 10}, b.Stats())

		used, ok := tok.Split(3)
		require.True(t, ok)
		require.Equal(t, int64(7), tok.Permits())
		used.Forget()
		require.Equal(t, credit.Stats{Balance: 0, Reserved: 7, Burst: 20, Rate: 10}, b.Stats())
		_, ok = tok.Split(8)
		require.False(t, ok, "split more than held")
		tok.Release()
		require.Equal(t, credit.Stats{Balance: 7, Reserved: 0, Burst: 20, Rate: 10}, b.Stats())
		time.Sleep(time.Second)
		require.Equal(t, int64(17), balance(b))
	})
}

// Ending a reservation twice, through a copy, panics in the package's
// voice and changes nothing.
func TestReservationEndedTwicePanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 0, 5)
		tok, ok := b.TryAcquire(3)
		require.True(t, ok)
		part, _ := tok.Split(1)
		copyOf := duplicate(&part) // what a caller who copies a token holds
		part.Forget()
		tok.Release()
		require.PanicsWithValue(t, "credit: a token from Acquire was ended twice, or more of it than it held (was it copied?)",
			func() { copyOf.Release() })
		require.Equal(t, credit.Stats{Balance: 4, Burst: 5}, b.Stats())
	})
}

// Waiting leaves nothing behind: waiters that give up stop their timers
// and leave no goroutine (TestMain checks), and the line is free after.
func TestAbandonedWaitsLeaveNothingBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1, 100, credit.WithInitial(0))
		ctx, cancel := context.WithCancel(context.Background())
		var ps []*pending
		for range 20 {
			ps = append(ps, goSpend(ctx, b, 50))
		}
		synctest.Wait()
		require.Equal(t, 20, b.Stats().Waiters)
		cancel()
		for _, p := range ps {
			<-p.done
			require.ErrorIs(t, p.err, context.Canceled)
		}
		require.Zero(t, b.Stats().Waiters)
		require.True(t, b.TrySpend(0))
		time.Sleep(time.Second)
		require.True(t, b.TrySpend(1))
	})
}

// uber-go/ratelimit's TestPer, ported: goroutines taking one credit at a
// time in a loop from a bucket of 8 credits a minute with a burst of 1 are
// served exactly once every 7.5 s, the first at once: 8 takes in the first
// minute, the 9th at 60 s. Each waiter takes its credit at the moment it
// accrued, so the loop loses nothing between a credit and the next call.
func TestSpendLoopTakesEveryCreditOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 8.0/60, 1)
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		var taken []time.Duration
		start := time.Now()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for b.Spend(ctx, 1) == nil {
					mu.Lock()
					taken = append(taken, time.Since(start))
					mu.Unlock()
				}
			})
		}
		time.Sleep(time.Minute - 1)
		synctest.Wait()
		mu.Lock()
		require.Len(t, taken, 8, "takes in the first minute")
		mu.Unlock()
		time.Sleep(10*time.Second + 1)
		synctest.Wait()
		cancel()
		wg.Wait()
		want := make([]time.Duration, 10)
		for i := range want {
			want[i] = time.Duration(i) * 7500 * time.Millisecond
		}
		require.Equal(t, want, taken)
	})
}
