package credittest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credit"
	"github.com/atomicsem/atomicsem/credittest"
	"github.com/atomicsem/atomicsem/keyed"
)

// bucketInputs is a credit.Bucket as CheckInputs drives it: one bucket,
// whatever the key.
type bucketInputs struct{ b *credit.Bucket }

func (b bucketInputs) TrySpend(_ string, n int64) (bool, error) { return b.b.TrySpend(n), nil }
func (b bucketInputs) Spend(ctx context.Context, _ string, n int64) error {
	return b.b.Spend(ctx, n)
}
func (b bucketInputs) Balance(string) int64 { return b.b.Stats().Balance }

// limiterInputs is a keyed.Limiter as CheckInputs drives it.
type limiterInputs struct{ l *keyed.Limiter }

func (l limiterInputs) TrySpend(key string, n int64) (bool, error) { return l.l.TrySpend(key, n), nil }
func (l limiterInputs) Spend(ctx context.Context, key string, n int64) error {
	return l.l.Spend(ctx, key, n)
}
func (l limiterInputs) Balance(key string) int64 { b, _ := l.l.Balance(key); return b }

// The same input gets the same answer from every credit backend of the
// module: credit's Bucket and keyed's Limiter here, rediscredit's in its
// own module.
func TestSiblingsAnswerAlike(t *testing.T) {
	t.Run("credit", func(t *testing.T) {
		credittest.CheckInputs(t, credittest.InputsConfig{
			Package: "credit",
			Keyless: true,
			New: func(_ *testing.T, rate float64, burst int64) (credittest.Inputs, error) {
				b, err := credit.New(rate, burst)
				if err != nil {
					return nil, err
				}
				return bucketInputs{b}, nil
			},
			NewWithNilOption: func() { _, _ = credit.New(1, 1, nil) },
			InvalidRate:      credit.ErrInvalidRate,
			InvalidBurst:     credit.ErrInvalidBurst,
		})
	})
	t.Run("keyed", func(t *testing.T) {
		credittest.CheckInputs(t, credittest.InputsConfig{
			Package: "keyed",
			New: func(_ *testing.T, rate float64, burst int64) (credittest.Inputs, error) {
				l, err := keyed.NewLimiter(rate, burst)
				if err != nil {
					return nil, err
				}
				return limiterInputs{l}, nil
			},
			NewWithNilOption: func() { _, _ = keyed.NewLimiter(1, 1, nil) },
			InvalidRate:      credit.ErrInvalidRate,
			InvalidBurst:     credit.ErrInvalidBurst,
		})
	})
}

// The semaphores of the module answer alike too: n = 0 is a request for
// nothing, n < 0 and n above the maximum are refused in the package's own
// words, matching atomicsem's sentinels, and a nil option panics in the
// package's words. (etcdsem, in its own module, runs semtest, which checks
// the same of it.)
func TestSemaphoreSiblingsAnswerAlike(t *testing.T) {
	ctx := context.Background()
	type sem struct {
		pkg        string
		acquire    func(n int64) error
		tryAcquire func(n int64) bool
		nilOption  func()
	}
	a := atomicsem.MustNew(2, 2)
	s := keyed.MustNewSemaphores(2)
	sems := []sem{
		{"atomicsem",
			func(n int64) error { tok, err := a.Acquire(ctx, n); endIf(&tok, err); return err },
			func(n int64) bool { tok, ok := a.TryAcquire(n); endIf(&tok, nilIf(ok)); return ok },
			func() { atomicsem.MustNew(1, 1, nil) }},
		{"keyed",
			func(n int64) error { tok, err := s.Acquire(ctx, "", n); endIf(&tok, err); return err },
			func(n int64) bool { tok, ok := s.TryAcquire("", n); endIf(&tok, nilIf(ok)); return ok },
			func() { keyed.MustNewSemaphores(1, nil) }},
	}
	for _, sm := range sems {
		t.Run(sm.pkg, func(t *testing.T) {
			require.NoError(t, sm.acquire(0))
			require.True(t, sm.tryAcquire(0))
			for _, tt := range []struct {
				n    int64
				want error
			}{{-1, atomicsem.ErrInvalidPermits}, {3, atomicsem.ErrExceedsMax}, {atomicsem.MaxPermits + 1, atomicsem.ErrInvalidPermits}} {
				err := sm.acquire(tt.n)
				require.ErrorIs(t, err, tt.want, "Acquire(%d)", tt.n)
				require.True(t, ownWords(err.Error(), sm.pkg), "%q is not in %s's words", err, sm.pkg)
				require.False(t, sm.tryAcquire(tt.n), "TryAcquire(%d)", tt.n)
			}
			msg := panicOf(t, sm.nilOption)
			require.True(t, ownWords(msg, sm.pkg), "panic %q is not in %s's words", msg, sm.pkg)
		})
	}
}

// Every constructor that takes a starting value and its bounds takes the
// starting value first: atomicsem.New(initial, max), etcdsem.New(...,
// initial, max), keyed.NewSemaphores(limit, WithMaxLimit(max)) and
// adaptive.WithLimits(initial, min, max).
func TestStartingValueComesFirst(t *testing.T) {
	a := atomicsem.MustNew(3, 8)
	require.Equal(t, atomicsem.Stats{Available: 3, Limit: 3, Max: 8}, a.Stats())
	lim, err := adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(3, 2, 8))
	require.NoError(t, err)
	require.EqualValues(t, 3, lim.Stats().Limit)
	_, err = adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(1, 2, 8))
	require.ErrorIs(t, err, adaptive.ErrInvalidLimits, "a start below the floor")
	msg := panicOf(t, func() { _, _ = adaptive.New(nil, nil) })
	require.True(t, strings.HasPrefix(msg, "adaptive: "), "panic %q", msg)
}

// ownWords reports whether msg begins with pkg's name and quotes no other
// package's.
func ownWords(msg, pkg string) bool {
	if !strings.HasPrefix(msg, pkg+": ") {
		return false
	}
	for _, other := range []string{"adaptive", "atomicsem", "credit", "etcdsem", "keyed", "rediscredit", "semcontract"} {
		if other != pkg && credittest.Quotes(msg, other) {
			return false
		}
	}
	return true
}

func endIf(tok interface{ Release() }, err error) {
	if err == nil {
		tok.Release()
	}
}

func nilIf(ok bool) error {
	if ok {
		return nil
	}
	return context.Canceled // any error: nothing to release
}

func panicOf(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		require.NotNil(t, r, "no panic")
		switch v := r.(type) {
		case string:
			msg = v
		case error:
			msg = v.Error()
		}
	}()
	f()
	return ""
}
