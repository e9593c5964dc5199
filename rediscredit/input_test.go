package rediscredit_test

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credit"
	"github.com/atomicsem/atomicsem/rediscredit"
)

// Bad input is refused with a matchable error before any round trip: the
// client points at a port nothing listens on, so a round trip would fail
// with ErrUnavailable instead, and the hook counts none.
func TestBadInputIsRefusedBeforeAnyRoundTrip(t *testing.T) {
	port, err := freePort()
	require.NoError(t, err)
	var n counter
	c := client(t, "127.0.0.1:"+itoa(port), &n)

	for _, tt := range []struct {
		name  string
		rate  float64
		burst int64
		want  error
	}{
		{"NaN rate", math.NaN(), 1, credit.ErrInvalidRate},
		{"negative rate", -1, 1, credit.ErrInvalidRate},
		{"+Inf rate", math.Inf(1), 1, credit.ErrInvalidRate},
		{"-Inf rate", math.Inf(-1), 1, credit.ErrInvalidRate},
		{"zero burst", 1, 0, credit.ErrInvalidBurst},
		{"burst over MaxBurst", 1, rediscredit.MaxBurst + 1, credit.ErrInvalidBurst},
	} {
		t.Run("New/"+tt.name, func(t *testing.T) {
			l, err := rediscredit.New(c, tt.rate, tt.burst)
			require.ErrorIs(t, err, tt.want)
			require.Nil(t, l)
		})
	}
	_, err = rediscredit.New(c, 1, 1, rediscredit.WithFallback(0))
	require.Error(t, err)
	_, err = rediscredit.New(c, 1, 1, rediscredit.WithHold(0))
	require.Error(t, err)

	l, err := rediscredit.New(c, 10, 5)
	require.NoError(t, err)
	for _, r := range []float64{math.NaN(), -1, math.Inf(1), math.Inf(-1)} {
		require.ErrorIs(t, l.SetRate(r), credit.ErrInvalidRate)
	}
	require.Equal(t, 10.0, l.Rate(), "a refused SetRate changed the rate")

	ctx := context.Background()
	calls := map[string]func(key string, n int64) error{
		"TrySpend":   func(k string, n int64) error { _, err := l.TrySpend(ctx, k, n); return err },
		"Spend":      func(k string, n int64) error { _, err := l.Spend(ctx, k, n); return err },
		"TryReserve": func(k string, n int64) error { _, _, err := l.TryReserve(ctx, k, n); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, call("k", 0), atomicsem.ErrInvalidPermits)
			require.ErrorIs(t, call("k", -1), atomicsem.ErrInvalidPermits)
			require.ErrorIs(t, call("k", 6), atomicsem.ErrExceedsMax)
			require.ErrorIs(t, call("", 1), rediscredit.ErrEmptyKey)
		})
	}
	_, err = l.Stats(ctx, "")
	require.ErrorIs(t, err, rediscredit.ErrEmptyKey)
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.TrySpend(done, "k", 1)
	require.Equal(t, context.Canceled, err, "a done context's error comes back unwrapped")

	require.PanicsWithValue(t, "rediscredit: nil client", func() { _, _ = rediscredit.New(nil, 1, 1) })
	//lint:ignore SA1012 a nil Context is the caller bug under test
	require.PanicsWithValue(t, "rediscredit: nil Context", func() { _, _ = l.TrySpend(nil, "k", 1) })
	require.Zero(t, n.n.Load(), "bad input reached Redis")

	// The same client does reach Redis for good input, and finds it down.
	_, err = l.TrySpend(ctx, "k", 1)
	require.ErrorIs(t, err, rediscredit.ErrUnavailable)
	require.Positive(t, n.n.Load())
}

func itoa(n int) string { return strconv.Itoa(n) }
