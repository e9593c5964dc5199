package credittest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/semcontract"
)

// Inputs is a credit backend, keyed or not, as CheckInputs drives it:
// the calls that take a caller's input. A backend without keys ignores key.
// An adapter returns the backend's errors as they are; a non-blocking call
// that reports a bool returns a nil error.
type Inputs interface {
	// TrySpend takes n credits of key's bucket if its balance covers them
	// now, and reports whether it did.
	TrySpend(key string, n int64) (bool, error)
	// Spend takes n credits of key's bucket, waiting until they accrue.
	Spend(ctx context.Context, key string, n int64) error
	// Balance returns the credit key's bucket holds now.
	Balance(key string) int64
}

// InputsConfig describes a backend to CheckInputs.
type InputsConfig struct {
	// Package is the backend's package name, with which every message of
	// its errors and panics begins ("keyed").
	Package string
	// New makes a backend of buckets of the rate and burst, or returns
	// the constructor's error.
	New func(t *testing.T, rate float64, burst int64) (Inputs, error)
	// NewWithNilOption calls the constructor with a nil option, which
	// must panic.
	NewWithNilOption func()
	// Keyless says that the backend is one bucket, not one per key.
	Keyless bool
	// InvalidRate and InvalidBurst are the errors that a refused rate and
	// burst match: credit.ErrInvalidRate and credit.ErrInvalidBurst, for
	// a backend built on package credit's rules. (The suite does not
	// import package credit, the first backend.)
	InvalidRate, InvalidBurst error
}

// CheckInputs checks the rules that every package of this module follows
// for the same input, so that a caller gets the same answer from each:
//
//   - a rate of +Inf is no limit: the burst can be spent at every moment;
//   - a rate of 0 accrues nothing, and is not an error;
//   - a negative or NaN rate is refused (InvalidRate), and so is a burst
//     below 1 or one that takes about 73 years or more to accrue
//     (InvalidBurst: 10^-5 credits a second with a burst of 2^30 − 1);
//   - n = 0 is a request for nothing: it succeeds, spending nothing;
//   - n < 0 is refused as semcontract.ErrInvalidPermits, and n above the
//     burst, which no wait could cover, as semcontract.ErrExceedsMax;
//   - the empty key is a key like any other;
//   - every error and panic message begins with the backend's package
//     name, and quotes no other package's words: the error matches the
//     sentinel of the package that defines the condition with errors.Is;
//   - a nil option is a caller bug, and panics.
//
// See docs/design.md, "One rule per input".
func CheckInputs(t *testing.T, c InputsConfig) {
	prefix := c.Package + ": "
	words := func(t *testing.T, err error) {
		t.Helper()
		msg := err.Error()
		require.True(t, strings.HasPrefix(msg, prefix), "%q does not begin %q", msg, prefix)
		for _, other := range []string{"atomicsem", "credit", "keyed", "rediscredit", "semcontract"} {
			if other+": " != prefix {
				require.False(t, Quotes(msg, other), "%q quotes %s's words", msg, other)
			}
		}
	}
	refused := func(t *testing.T, rate float64, burst int64, want error) {
		t.Helper()
		_, err := c.New(t, rate, burst)
		require.ErrorIs(t, err, want, "rate %v, burst %d", rate, burst)
		words(t, err)
	}
	ctx := context.Background()

	t.Run("RateOfInfIsNoLimit", func(t *testing.T) {
		b, err := c.New(t, math.Inf(1), 3)
		require.NoError(t, err)
		for i := range 5 {
			ok, err := b.TrySpend("k", 3)
			require.NoError(t, err)
			require.True(t, ok, "spend %d of the whole burst", i)
		}
		require.NoError(t, b.Spend(ctx, "k", 3))
	})
	t.Run("RateOfZeroAccruesNothing", func(t *testing.T) {
		b, err := c.New(t, 0, 2)
		require.NoError(t, err)
		ok, err := b.TrySpend("k", 2)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.TrySpend("k", 1)
		require.NoError(t, err)
		require.False(t, ok)
	})
	t.Run("BadRateOrBurstIsRefused", func(t *testing.T) {
		refused(t, math.NaN(), 1, c.InvalidRate)
		refused(t, -1, 1, c.InvalidRate)
		refused(t, math.Inf(-1), 1, c.InvalidRate)
		refused(t, 1, 0, c.InvalidBurst)
		refused(t, 1, -1, c.InvalidBurst)
		refused(t, 1e-5, semcontract.MaxPermits, c.InvalidBurst)
	})
	t.Run("ZeroIsARequestForNothing", func(t *testing.T) {
		b, err := c.New(t, 0, 2)
		require.NoError(t, err)
		ok, err := b.TrySpend("k", 2)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.TrySpend("k", 0)
		require.NoError(t, err)
		require.True(t, ok, "TrySpend(0) on an empty bucket")
		require.NoError(t, b.Spend(ctx, "k", 0), "Spend(0) on an empty bucket that never refills")
		require.Zero(t, b.Balance("k"))
		full, err := c.New(t, 0, 2)
		require.NoError(t, err)
		ok, err = full.TrySpend("k", 0)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, full.Spend(ctx, "k", 0))
		require.Equal(t, int64(2), full.Balance("k"), "a request for nothing spent something")
	})
	t.Run("NOutOfRangeIsRefused", func(t *testing.T) {
		b, err := c.New(t, 1, 2)
		require.NoError(t, err)
		for _, tt := range []struct {
			n    int64
			want error
		}{{-1, semcontract.ErrInvalidPermits}, {3, semcontract.ErrExceedsMax}} {
			err := b.Spend(ctx, "k", tt.n)
			require.ErrorIs(t, err, tt.want, "Spend(%d)", tt.n)
			words(t, err)
			ok, err := b.TrySpend("k", tt.n)
			require.False(t, ok, "TrySpend(%d)", tt.n)
			if err != nil {
				require.ErrorIs(t, err, tt.want, "TrySpend(%d)", tt.n)
				words(t, err)
			}
		}
		require.Equal(t, int64(2), b.Balance("k"), "a refused request spent something")
	})
	t.Run("EmptyKeyIsAKey", func(t *testing.T) {
		if c.Keyless {
			t.Skip("the backend has no keys")
		}
		b, err := c.New(t, 0, 2)
		require.NoError(t, err)
		ok, err := b.TrySpend("", 2)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.TrySpend("", 1)
		require.NoError(t, err)
		require.False(t, ok, "the empty key's bucket is empty")
		require.Zero(t, b.Balance(""))
	})
	t.Run("NilOptionPanics", func(t *testing.T) {
		defer func() {
			r := recover()
			require.NotNil(t, r, "a nil option did not panic")
			require.True(t, strings.HasPrefix(fmt.Sprint(r), prefix), "panic %q does not begin %q", r, prefix)
		}()
		c.NewWithNilOption()
	})
}

// Quotes reports whether msg holds package pkg's words: pkg followed by
// ": ", at the start of msg or after a character that cannot end a
// package name ("credit: " in "keyed: credit: invalid rate", not in
// "rediscredit: invalid rate").
func Quotes(msg, pkg string) bool {
	for i := 0; ; {
		j := strings.Index(msg[i:], pkg+": ")
		if j < 0 {
			return false
		}
		j += i
		if j == 0 || !isNameByte(msg[j-1]) {
			return true
		}
		i = j + 1
	}
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}
