package credit_test

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credit"
)

func TestNewRejectsBadArguments(t *testing.T) {
	tests := []struct {
		name  string
		rate  float64
		burst int64
		opts  []credit.Option
		want  error
	}{
		{"negative rate", -1, 10, nil, credit.ErrInvalidRate},
		{"NaN rate", math.NaN(), 10, nil, credit.ErrInvalidRate},
		{"negative infinite rate", math.Inf(-1), 10, nil, credit.ErrInvalidRate},
		{"zero burst", 1, 0, nil, credit.ErrInvalidBurst},
		{"burst above MaxPermits", 1, atomicsem.MaxPermits + 1, nil, credit.ErrInvalidBurst},
		{"negative initial", 1, 10, []credit.Option{credit.WithInitial(-1)}, credit.ErrInvalidInitial},
		{"initial above burst", 1, 10, []credit.Option{credit.WithInitial(11)}, credit.ErrInvalidInitial},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := credit.New(tt.rate, tt.burst, tt.opts...)
			require.ErrorIs(t, err, tt.want)
			require.Nil(t, b)
			require.Panics(t, func() { credit.MustNew(tt.rate, tt.burst, tt.opts...) })
		})
	}
}

func TestNewAcceptsTheEdges(t *testing.T) {
	tests := []struct {
		name        string
		rate        float64
		burst       int64
		opts        []credit.Option
		wantBalance int64
	}{
		{"zero rate", 0, 1, nil, 1},
		{"infinite rate", math.Inf(1), 1, nil, 1},
		{"burst of MaxPermits", 1, atomicsem.MaxPermits, nil, atomicsem.MaxPermits},
		{"empty", 5, 10, []credit.Option{credit.WithInitial(0)}, 0},
		{"full by option", 5, 10, []credit.Option{credit.WithInitial(10)}, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := mustNew(t, tt.rate, tt.burst, tt.opts...)
				st := b.Stats()
				require.Equal(t, credit.Stats{Balance: tt.wantBalance, Burst: tt.burst, Rate: tt.rate}, st)
			})
		})
	}
}

// SetRate refuses a bad rate and changes nothing, not even the accrual.
func TestSetRateRejectsBadRatesAndChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 10, 100, credit.WithInitial(0))
		time.Sleep(250 * time.Millisecond)
		for _, r := range []float64{-1, math.NaN(), math.Inf(-1)} {
			require.ErrorIs(t, b.SetRate(r), credit.ErrInvalidRate)
		}
		time.Sleep(50 * time.Millisecond)
		require.Equal(t, credit.Stats{Balance: 3, Burst: 100, Rate: 10}, b.Stats())
	})
}

// Requests outside [0, burst] fail at once, without waiting, and change
// nothing.
func TestRequestsOutsideTheBurstFailAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1, 5)
		ctx := context.Background()
		require.ErrorIs(t, b.Spend(ctx, 6), atomicsem.ErrExceedsMax)
		require.ErrorIs(t, b.Spend(ctx, -1), atomicsem.ErrInvalidPermits)
		_, err := b.Acquire(ctx, 6)
		require.ErrorIs(t, err, atomicsem.ErrExceedsMax)
		_, err = b.Acquire(ctx, -1)
		require.ErrorIs(t, err, atomicsem.ErrInvalidPermits)
		require.False(t, b.TrySpend(6))
		require.False(t, b.TrySpend(-1))
		_, ok := b.TryAcquire(6)
		require.False(t, ok)
		require.Equal(t, int64(5), balance(b))
	})
}

// A done context fails Spend and Acquire even with the credit there.
func TestDoneContextFailsEvenWithCreditThere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1, 5)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, b.Spend(ctx, 1), context.Canceled)
		_, err := b.Acquire(ctx, 1)
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, int64(5), balance(b))
	})
}

// Zero is always there: TrySpend(0), Spend(ctx, 0) and the acquires of 0
// succeed without touching the balance.
func TestZeroCreditsAlwaysSucceed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 0, 1, credit.WithInitial(0))
		require.True(t, b.TrySpend(0))
		require.NoError(t, b.Spend(context.Background(), 0))
		tok, ok := b.TryAcquire(0)
		require.True(t, ok)
		tok.Forget()
		tok, err := b.Acquire(context.Background(), 0)
		require.NoError(t, err)
		tok.Release()
		require.Equal(t, credit.Stats{Burst: 1}, b.Stats())
	})
}

// A bucket is one allocation of at most 64 bytes: what a caller that keeps
// a bucket per key pays per key, beside its map entry.
func TestBucketFitsInSixtyFourBytes(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(credit.Bucket{}), uintptr(64))
}
