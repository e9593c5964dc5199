package credit_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/credit"
)

// mustNew is credit.New for arguments the test knows to be valid.
func mustNew(t testing.TB, rate float64, burst int64, opts ...credit.Option) *credit.Bucket {
	t.Helper()
	b, err := credit.New(rate, burst, opts...)
	require.NoError(t, err)
	return b
}

// balance returns the bucket's balance now.
func balance(b *credit.Bucket) int64 { return b.Stats().Balance }

// accrued returns ⌊r·d⌋ for a rate r in credits per second, given exactly
// as a fraction, and a duration d: the credit that accrues in d from
// nothing, computed without the bucket's arithmetic.
func accrued(r *big.Rat, d time.Duration) int64 {
	x := new(big.Rat).Mul(r, big.NewRat(int64(d), int64(time.Second)))
	q := new(big.Int).Quo(x.Num(), x.Denom())
	return q.Int64()
}

// ratOf parses a rate written as an exact fraction or decimal ("7.3",
// "1/3600").
func ratOf(t testing.TB, s string) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(s)
	require.True(t, ok, "bad rate %q", s)
	return r
}

// floatOf returns the float64 nearest to r, as a caller would write it.
func floatOf(r *big.Rat) float64 {
	f, _ := r.Float64()
	return f
}

// duplicate returns a copy of *p. Copying a token is the caller bug that
// the package must catch; go vet reports copies written out, so the test
// makes its copy through a type parameter.
func duplicate[T any](p *T) T { return *p }
