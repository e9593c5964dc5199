package keyed_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credit"
	"github.com/atomicsem/atomicsem/keyed"
	"github.com/atomicsem/atomicsem/token"
)

func TestLimiterBalanceAccruesPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := keyed.NewLimiter(3, 10)
		require.NoError(t, err)
		require.True(t, l.TrySpend("a", 10))
		require.False(t, l.TrySpend("a", 1), "a is empty")
		require.True(t, l.TrySpend("b", 10), "b has a bucket of its own")
		for _, d := range []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second, 10 * time.Second} {
			key := d.String()
			start := time.Now()
			require.True(t, l.TrySpend(key, 10))
			time.Sleep(d)
			bal, _ := l.Balance(key)
			require.Equal(t, min(10, int64(math.Floor(3*d.Seconds()))), bal,
				"after %v from empty the balance is min(burst, ⌊rate·t⌋)", time.Since(start))
		}
	})
}

func TestLimiterSpendWaitsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := keyed.NewLimiter(1, 2)
		require.NoError(t, err)
		require.True(t, l.TrySpend("k", 2))
		order := make(chan int, 3)
		for i := range 3 {
			go func() {
				if l.Spend(context.Background(), "k", 1) == nil {
					order <- i
				}
			}()
			synctest.Wait()
		}
		require.False(t, l.TrySpend("k", 1), "TrySpend never overtakes a waiter")
		require.Zero(t, l.Sweep(), "a key waited on is not dropped")
		for i := range 3 {
			time.Sleep(time.Second)
			synctest.Wait()
			require.Equal(t, i, <-order)
		}
	})
}

func TestLimiterCancelledSpendSpendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := keyed.NewLimiter(1, 2)
		require.NoError(t, err)
		require.True(t, l.TrySpend("k", 2))
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, l.Spend(ctx, "k", 2), context.DeadlineExceeded)
		bal, _ := l.Balance("k")
		require.EqualValues(t, 1, bal, "the credit accrued while waiting stays")
	})
}

func TestLimiterReservationComesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := keyed.NewLimiter(1, 3)
		require.NoError(t, err)
		tok, ok := l.TryAcquire("k", 2)
		require.True(t, ok)
		require.Zero(t, l.Sweep(), "a key with credit reserved is not dropped")
		bal, _ := l.Balance("k")
		require.EqualValues(t, 1, bal)
		tok.Release()
		bal, _ = l.Balance("k")
		require.EqualValues(t, 3, bal)
		require.Equal(t, 1, l.Sweep())
		tok2, err := l.Acquire(t.Context(), "k", 3)
		require.NoError(t, err)
		tok2.Forget()
		bal, _ = l.Balance("k")
		require.Zero(t, bal)
	})
}

func TestLimiterTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := keyed.NewLimiter(2, 4)
		require.NoError(t, err)
		d, err := l.Take("k", 3)
		require.NoError(t, err)
		require.Equal(t, keyed.Decision{Spent: true, Balance: 1, FullIn: 1500 * time.Millisecond}, d)
		d, err = l.Take("k", 2)
		require.NoError(t, err)
		require.Equal(t, keyed.Decision{Balance: 1, RetryIn: 500 * time.Millisecond, FullIn: 1500 * time.Millisecond}, d)
		time.Sleep(500 * time.Millisecond)
		d, err = l.Take("k", 2)
		require.NoError(t, err)
		require.True(t, d.Spent)
	})
}

func TestLimiterCapRefusesNewKeyWhileAllAreLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := keyed.NewLimiter(1, 2, keyed.WithMaxKeys(2))
		require.NoError(t, err)
		require.True(t, l.TrySpend("a", 1))
		require.True(t, l.TrySpend("b", 2))
		require.False(t, l.TrySpend("c", 1), "the table is full of keys mid-limit")
		_, err = l.Take("c", 1)
		require.ErrorIs(t, err, keyed.ErrTooManyKeys)
		require.ErrorIs(t, l.Spend(t.Context(), "c", 1), keyed.ErrTooManyKeys)
		require.False(t, l.TrySpend("b", 1), "b keeps its limit")
		time.Sleep(time.Second)
		require.True(t, l.TrySpend("c", 1), "a is full again, so it can go")
		bal, present := l.Balance("b")
		require.True(t, present)
		require.EqualValues(t, 1, bal)
	})
}

func TestLimiterBadInput(t *testing.T) {
	tests := []struct {
		name  string
		rate  float64
		burst int64
		opts  []keyed.Option
		want  error
	}{
		{"NaN rate", math.NaN(), 1, nil, credit.ErrInvalidRate},
		{"negative rate", -1, 1, nil, credit.ErrInvalidRate},
		{"zero burst", 1, 0, nil, credit.ErrInvalidBurst},
		{"cap 0", 1, 1, []keyed.Option{keyed.WithMaxKeys(0)}, keyed.ErrInvalidMaxKeys},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := keyed.NewLimiter(tt.rate, tt.burst, tt.opts...)
			require.ErrorIs(t, err, tt.want)
			require.Nil(t, l)
		})
	}
	l, err := keyed.NewLimiter(1, 2)
	require.NoError(t, err)
	for _, n := range []int64{-1, 3} {
		require.False(t, l.TrySpend("k", n))
		_, ok := l.TryAcquire("k", n)
		require.False(t, ok)
		_, err := l.Take("k", n)
		require.Error(t, err)
	}
	require.ErrorIs(t, l.Spend(t.Context(), "k", 3), atomicsem.ErrExceedsMax)
	require.ErrorIs(t, l.Spend(t.Context(), "k", -1), atomicsem.ErrInvalidPermits)
	_, err = l.Acquire(t.Context(), "k", 3)
	require.ErrorIs(t, err, atomicsem.ErrExceedsMax)
	require.Zero(t, l.Len(), "bad input makes no entry")
}

// TestLimiterDroppingChangesNoAnswer drives a Limiter with a small cap and
// an unbounded map of credit.Bucket with the same random operations at the
// same fake times (spends, reservations settled either way, sleeps,
// sweeps), and compares every answer and every key's balance. The
// Limiter drops keys when full and on Sweep; the map never does. A new
// key the Limiter refuses must find it full of keys whose buckets are not
// full.
func TestLimiterDroppingChangesNoAnswer(t *testing.T) {
	const maxKeys = 5
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for seed := range uint64(40) {
		synctest.Test(t, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 48))
			rate := []float64{0.5, 3, 1000}[seed%3]
			l, err := keyed.NewLimiter(rate, 4, keyed.WithMaxKeys(maxKeys))
			require.NoError(t, err)
			ref := map[string]*credit.Bucket{}
			bucket := func(k string) *credit.Bucket {
				if ref[k] == nil {
					ref[k] = credit.MustNew(rate, 4)
				}
				return ref[k]
			}
			inUse := func() int {
				n := 0
				for _, b := range ref {
					if st := b.Stats(); st.Balance < 4 || st.Reserved > 0 {
						n++
					}
				}
				return n
			}
			type held struct{ got, want *token.Token }
			var reserved []held
			for step := range 150 {
				k := keys[r.IntN(len(keys))]
				where := fmt.Sprintf("seed %d step %d key %s", seed, step, k)
				switch op := r.IntN(11); {
				case op >= 8 && op < 10:
					n := r.Int64N(3)
					_, present := l.Balance(k)
					want, wantOK := bucket(k).TryAcquire(n)
					got, gotOK := l.TryAcquire(k, n)
					if wantOK && !gotOK && !present && l.Len() == maxKeys {
						require.GreaterOrEqual(t, inUse(), maxKeys, "%s: refused while a key could go", where)
						want.Release()
						delete(ref, k)
						continue
					}
					require.Equal(t, wantOK, gotOK, "%s: TryAcquire(%d)", where, n)
					if gotOK {
						reserved = append(reserved, held{&got, &want})
					}
				case op == 10 && len(reserved) > 0:
					i := r.IntN(len(reserved))
					h := reserved[i]
					reserved = append(reserved[:i], reserved[i+1:]...)
					if r.IntN(2) == 0 {
						h.got.Release()
						h.want.Release()
					} else {
						h.got.Forget()
						h.want.Forget()
					}
				case op < 4:
					n := r.Int64N(5)
					_, present := l.Balance(k)
					want := bucket(k).TrySpend(n)
					got := l.TrySpend(k, n)
					if want && !got && !present && l.Len() == maxKeys {
						require.GreaterOrEqual(t, inUse(), maxKeys, "%s: refused while a key could go", where)
						// The key was absent, so its reference bucket was full:
						// a new one undoes the reference's spend.
						delete(ref, k)
						continue
					}
					require.Equal(t, want, got, "%s: TrySpend(%d)", where, n)
				case op < 6:
					time.Sleep(time.Duration(r.Int64N(int64(float64(2*time.Second) / rate))))
				case op == 6:
					l.Sweep()
				case op == 7:
					// Time passes while other keys come and go.
					time.Sleep(time.Duration(r.Int64N(int64(time.Millisecond))))
				}
				require.LessOrEqual(t, l.Len(), maxKeys, where)
				require.NoError(t, keyed.CheckDue(l), where)
				for _, k := range keys {
					got, _ := l.Balance(k)
					require.Equal(t, bucket(k).Stats().Balance, got, "%s: balance of %s", where, k)
				}
			}
		})
	}
}

func TestLimiterReleaseWakesWaiterAndCancelledHeadHandsOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := keyed.NewLimiter(0, 3) // no accrual: only Release gives credit
		require.NoError(t, err)
		tok, ok := l.TryAcquire("k", 3)
		require.True(t, ok)
		ctx, cancel := context.WithCancel(t.Context())
		first := make(chan error, 1)
		go func() { first <- l.Spend(ctx, "k", 3) }()
		synctest.Wait()
		second := make(chan error, 1)
		go func() { second <- l.Spend(context.Background(), "k", 2) }()
		synctest.Wait()
		d, err := l.Take("k", 1)
		require.NoError(t, err)
		require.Equal(t, keyed.Decision{RetryIn: -1}, d, "no accrual at rate 0, and all the burst not reserved is there")
		cancel()
		synctest.Wait()
		require.ErrorIs(t, <-first, context.Canceled)
		require.Empty(t, second, "the new front still waits for credit")
		tok.Release()
		synctest.Wait()
		require.NoError(t, <-second, "a Release wakes the front")
		bal, _ := l.Balance("k")
		require.EqualValues(t, 1, bal)
		require.NoError(t, keyed.CheckDue(l))
	})
}

// TestLimiterSpendStreamKeepsRate checks that a stream of Spend calls of
// one key, each waiting for its credit, gets exactly rate·t credits in t.
func TestLimiterSpendStreamKeepsRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := keyed.NewLimiter(7.3, 1)
		require.NoError(t, err)
		require.True(t, l.TrySpend("k", 1))
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second+time.Millisecond)
		defer cancel()
		spent := 0
		for l.Spend(ctx, "k", 1) == nil {
			spent++
		}
		require.Equal(t, 73, spent, "⌊7.3·10.001⌋ credits in 10.001 s")
	})
}

func TestLimiterTrySpendDoesNotOvertakeALargerWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := keyed.NewLimiter(1, 2)
		require.NoError(t, err)
		require.True(t, l.TrySpend("k", 2))
		done := make(chan error, 1)
		go func() { done <- l.Spend(context.Background(), "k", 2) }()
		synctest.Wait()
		time.Sleep(time.Second)
		bal, _ := l.Balance("k")
		require.EqualValues(t, 1, bal)
		require.False(t, l.TrySpend("k", 1), "the credit is the waiter's")
		_, ok := l.TryAcquire("k", 1)
		require.False(t, ok, "the credit is the waiter's")
		time.Sleep(time.Second)
		synctest.Wait()
		require.NoError(t, <-done)
	})
}

// TestLimiterKeyWithALineIsNotDropped gives a waiting Spend its credit back
// and sweeps at once, before the waiter has woken to take it: the bucket
// is full then, but the key has a line, so it must stay.
func TestLimiterKeyWithALineIsNotDropped(t *testing.T) {
	for range 50 {
		synctest.Test(t, func(t *testing.T) {
			l, err := keyed.NewLimiter(0, 2)
			require.NoError(t, err)
			tok, ok := l.TryAcquire("k", 2)
			require.True(t, ok)
			done := make(chan error, 1)
			go func() { done <- l.Spend(context.Background(), "k", 2) }()
			synctest.Wait()
			tok.Release()
			l.Sweep()
			synctest.Wait()
			require.NoError(t, <-done)
			bal, present := l.Balance("k")
			require.True(t, present, "a bucket spent from at rate 0 is not new")
			require.Zero(t, bal)
			require.NoError(t, keyed.CheckDue(l))
		})
	}
}

// The k-th credit of a stream of waiting spends on one key accrues at
// exactly k/rate: at 7 a minute with a burst of 1, the 7th Spend returns
// at 60 s to the nanosecond, not a few nanoseconds later.
func TestLimiterPacingDoesNotDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := keyed.MustNewLimiter(7.0/60, 1)
		require.True(t, l.TrySpend("k", 1))
		start := time.Now()
		for k := int64(1); k <= 14; k++ {
			require.NoError(t, l.Spend(context.Background(), "k", 1))
			// ⌈k·60/7 s⌉ in nanoseconds.
			want := time.Duration((k*60_000_000_000 + 6) / 7)
			require.Equal(t, want, time.Since(start), "credit %d", k)
		}
	})
}
