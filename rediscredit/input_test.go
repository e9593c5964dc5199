package rediscredit_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credit"
	"github.com/atomicsem/atomicsem/credittest"
	"github.com/atomicsem/atomicsem/rediscredit"
)

// Bad input is refused with a matchable error in rediscredit's own words
// before any round trip: the client points at a port nothing listens on,
// so a round trip would fail with ErrUnavailable instead, and the hook
// counts none.
func TestBadInputIsRefusedBeforeAnyRoundTrip(t *testing.T) {
	port, err := freePort()
	require.NoError(t, err)
	var n counter
	c := client(t, "127.0.0.1:"+itoa(port), &n)
	ownWords := func(t *testing.T, err error) {
		t.Helper()
		require.True(t, strings.HasPrefix(err.Error(), "rediscredit: "), "%q", err)
		require.False(t, credittest.Quotes(err.Error(), "credit"), "%q quotes credit's words", err)
		require.False(t, credittest.Quotes(err.Error(), "atomicsem"), "%q quotes atomicsem's words", err)
	}

	for _, tt := range []struct {
		name  string
		rate  float64
		burst int64
		want  error
	}{
		{"NaN rate", math.NaN(), 1, credit.ErrInvalidRate},
		{"negative rate", -1, 1, credit.ErrInvalidRate},
		{"-Inf rate", math.Inf(-1), 1, credit.ErrInvalidRate},
		{"zero burst", 1, 0, credit.ErrInvalidBurst},
		{"burst over MaxBurst", 1, rediscredit.MaxBurst + 1, credit.ErrInvalidBurst},
		{"burst beyond MaxFill", 1e-5, atomicsem.MaxPermits, credit.ErrInvalidBurst},
		{"burst over MaxPermits beyond MaxFill", 1e-3, rediscredit.MaxBurst, credit.ErrInvalidBurst},
	} {
		t.Run("New/"+tt.name, func(t *testing.T) {
			l, err := rediscredit.New(c, tt.rate, tt.burst)
			require.ErrorIs(t, err, tt.want)
			ownWords(t, err)
			require.Nil(t, l)
		})
	}
	_, err = rediscredit.New(c, 1, 1, rediscredit.WithFallback(0))
	require.Error(t, err)
	_, err = rediscredit.New(c, 1, 1, rediscredit.WithHold(0))
	require.Error(t, err)
	_, err = rediscredit.New(c, math.Inf(1), 1)
	require.NoError(t, err, "+Inf is no limit")
	_, err = rediscredit.New(c, 1e-10, rediscredit.MaxBurst)
	require.NoError(t, err, "a rate that credit counts as zero has no fill time")

	l, err := rediscredit.New(c, 10, 5)
	require.NoError(t, err)
	for _, r := range []float64{math.NaN(), -1, math.Inf(-1)} {
		err := l.SetRate(r)
		require.ErrorIs(t, err, credit.ErrInvalidRate)
		ownWords(t, err)
	}
	big, err := rediscredit.New(c, 1, atomicsem.MaxPermits)
	require.NoError(t, err)
	err = big.SetRate(1e-5)
	require.ErrorIs(t, err, credit.ErrInvalidRate, "a rate at which the burst takes MaxFill or longer")
	ownWords(t, err)
	require.Equal(t, 10.0, l.Rate(), "a refused SetRate changed the rate")
	require.Equal(t, 1.0, big.Rate(), "a refused SetRate changed the rate")

	ctx := context.Background()
	calls := map[string]func(key string, n int64) error{
		"TrySpend":   func(k string, n int64) error { _, err := l.TrySpend(ctx, k, n); return err },
		"Spend":      func(k string, n int64) error { _, err := l.Spend(ctx, k, n); return err },
		"TryReserve": func(k string, n int64) error { _, _, err := l.TryReserve(ctx, k, n); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call("k", -1)
			require.ErrorIs(t, err, atomicsem.ErrInvalidPermits)
			ownWords(t, err)
			err = call("k", 6)
			require.ErrorIs(t, err, atomicsem.ErrExceedsMax)
			ownWords(t, err)
		})
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.TrySpend(done, "k", 1)
	require.Equal(t, context.Canceled, err, "a done context's error comes back unwrapped")
	require.Zero(t, n.n.Load(), "bad input reached Redis")

	// The same client does reach Redis for good input, and finds it down.
	_, err = l.TrySpend(ctx, "k", 1)
	require.ErrorIs(t, err, rediscredit.ErrUnavailable)
	require.Positive(t, n.n.Load())
}

// Provable caller bugs panic in rediscredit's words and send nothing.
func TestMisusePanicsWithPrefix(t *testing.T) {
	port, err := freePort()
	require.NoError(t, err)
	var n counter
	c := client(t, "127.0.0.1:"+itoa(port), &n)
	l, err := rediscredit.New(c, 1, 1)
	require.NoError(t, err)
	var nilL *rediscredit.Limiter
	var nilR *rediscredit.Reservation
	var nilClient *redis.Client
	var nilCtx context.Context
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		f    func()
	}{
		{"New nil client", func() { _, _ = rediscredit.New(nil, 1, 1) }},
		{"New typed-nil client", func() { _, _ = rediscredit.New(nilClient, 1, 1) }},
		{"New typed-nil cluster client", func() { _, _ = rediscredit.New((*redis.ClusterClient)(nil), 1, 1) }},
		{"New nil option", func() { _, _ = rediscredit.New(c, 1, 1, nil) }},
		{"New nil option after one", func() { _, _ = rediscredit.New(c, 1, 1, rediscredit.WithHold(time.Second), nil) }},
		{"TrySpend nil ctx", func() { _, _ = l.TrySpend(nilCtx, "k", 1) }},
		{"nil Limiter TrySpend", func() { _, _ = nilL.TrySpend(ctx, "k", 1) }},
		{"nil Limiter Spend", func() { _, _ = nilL.Spend(ctx, "k", 1) }},
		{"nil Limiter TryReserve", func() { _, _, _ = nilL.TryReserve(ctx, "k", 1) }},
		{"nil Limiter Stats", func() { _, _ = nilL.Stats(ctx, "k") }},
		{"nil Limiter SetRate", func() { _ = nilL.SetRate(1) }},
		{"nil Limiter Rate", func() { nilL.Rate() }},
		{"nil Limiter Burst", func() { nilL.Burst() }},
		{"zero Limiter TrySpend", func() { _, _ = new(rediscredit.Limiter).TrySpend(ctx, "k", 1) }},
		{"nil Reservation Settle", func() { _, _ = nilR.Settle(ctx, 0) }},
		{"nil Reservation Release", func() { _, _ = nilR.Release(ctx) }},
		{"nil Reservation Forget", func() { _, _ = nilR.Forget(ctx) }},
		{"nil Reservation Credit", func() { nilR.Credit() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r, "no panic")
				msg, _ := r.(string)
				require.True(t, strings.HasPrefix(msg, "rediscredit: "), "panic %v", r)
			}()
			tt.f()
		})
	}
	require.Zero(t, n.n.Load(), "a misuse reached Redis")
}

// limiterInputs is a Limiter as credittest.CheckInputs drives it, with
// keys of its own test's and no error but the ones it checks for.
type limiterInputs struct {
	t      *testing.T
	l      *rediscredit.Limiter
	prefix string
}

func (l limiterInputs) TrySpend(key string, n int64) (bool, error) {
	res, err := l.l.TrySpend(context.Background(), l.prefix+key, n)
	return res.OK, err
}

func (l limiterInputs) Spend(ctx context.Context, key string, n int64) error {
	_, err := l.l.Spend(ctx, l.prefix+key, n)
	return err
}

func (l limiterInputs) Balance(key string) int64 {
	res, err := l.l.Stats(context.Background(), l.prefix+key)
	require.NoError(l.t, err)
	return res.Balance
}

// The same input gets the same answer from the Redis backend as from
// credit's and keyed's, against a real server: +Inf, 0, n = 0, n out of
// range, the empty key, the package's own words and a nil option.
func TestSiblingsAnswerAlike(t *testing.T) {
	srv := needServer(t)
	c := client(t, srv.addr())
	require.NoError(t, c.FlushDB(context.Background()).Err())
	made := 0
	credittest.CheckInputs(t, credittest.InputsConfig{
		Package: "rediscredit",
		New: func(t *testing.T, rate float64, burst int64) (credittest.Inputs, error) {
			l, err := rediscredit.New(c, rate, burst)
			if err != nil {
				return nil, err
			}
			made++
			// Each bucket of the table its own keys; the empty key of the
			// table is the bare prefix's.
			return limiterInputs{t, l, "inputs:" + strconv.Itoa(made) + ":"}, nil
		},
		NewWithNilOption: func() { _, _ = rediscredit.New(c, 1, 1, nil) },
		InvalidRate:      credit.ErrInvalidRate,
		InvalidBurst:     credit.ErrInvalidBurst,
	})
	// And the empty key itself is a key of Redis's.
	l, err := rediscredit.New(c, 0, 1)
	require.NoError(t, err)
	res, err := l.TrySpend(context.Background(), "", 1)
	require.NoError(t, err)
	require.True(t, res.OK)
	res, err = l.TrySpend(context.Background(), "", 1)
	require.NoError(t, err)
	require.False(t, res.OK)
	require.NoError(t, c.Del(context.Background(), "").Err())
}

func itoa(n int) string { return strconv.Itoa(n) }
