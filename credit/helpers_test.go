package credit_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
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

// largestBurst returns the largest burst, at most atomicsem.MaxPermits,
// that accrues at rate r in less than credit.MaxFill: the largest k with
// k/r seconds below MaxFill.
func largestBurst(r *big.Rat) int64 {
	reach := new(big.Rat).Mul(r, big.NewRat(int64(credit.MaxFill), int64(time.Second)))
	k := new(big.Int).Quo(reach.Num(), reach.Denom()) // ⌊MaxFill·r⌋
	if new(big.Rat).SetInt(k).Cmp(reach) == 0 {
		k.Sub(k, big.NewInt(1)) // exactly MaxFill is refused too
	}
	if !k.IsInt64() || k.Int64() > atomicsem.MaxPermits {
		return atomicsem.MaxPermits
	}
	return k.Int64()
}

// fillTime returns ⌈k/r⌉ in nanoseconds: when k credits have accrued from
// empty at rate r, to the first whole nanosecond.
func fillTime(r *big.Rat, k int64) time.Duration {
	x := new(big.Rat).Quo(new(big.Rat).SetInt64(k), r)
	x.Mul(x, big.NewRat(int64(time.Second), 1))
	q, rem := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if rem.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return time.Duration(q.Int64())
}
