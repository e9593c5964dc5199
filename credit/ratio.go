package credit

import (
	"math"
	"math/big"
	"math/bits"
)

// maxDenominator bounds the denominator q of the fraction p/q credits per
// second that a rate is held as. With it, q·10^9, the nanoseconds in q
// seconds, fits the 64-bit divisor that bits.Div64 takes, and every rate
// that is a fraction with a denominator up to it, which the float64 carries
// to its precision (whole rates, decimals such as 7.3, periods such as
// 1.0/3600), is held exactly.
const maxDenominator = 1_000_000_000

// ratio is a rate as a fraction of integers: num credits every den
// nanoseconds. The zero ratio accrues nothing; inf accrues without limit.
type ratio struct {
	num, den uint64 // den > 0; num == 0 for a rate of zero
	inf      bool
}

// ratioOf returns the fraction p/q credits per second nearest to rate with
// q ≤ maxDenominator, as credits per nanosecond. It requires rate ≥ 0 and
// not NaN. Rates of 2^63 per second and above are unlimited, as is +Inf;
// rates below one credit in 2·10^9 seconds (63 years) round to zero.
func ratioOf(rate float64) ratio {
	switch {
	case math.IsInf(rate, 1) || rate >= 1<<63:
		return ratio{inf: true}
	case rate == 0:
		return ratio{den: 1}
	case rate < 1<<53 && rate == math.Trunc(rate):
		// A whole rate is its own nearest fraction, p/1: no continued
		// fraction to walk.
		p := uint64(rate)
		g := gcd(p, 1_000_000_000)
		return ratio{num: p / g, den: 1_000_000_000 / g}
	}
	p, q := limitDenominator(new(big.Rat).SetFloat64(rate), maxDenominator)
	if p == 0 {
		return ratio{den: 1}
	}
	// p credits per q seconds is p credits per q·10^9 nanoseconds.
	num, den := p, q*1_000_000_000
	g := gcd(num, den)
	return ratio{num: num / g, den: den / g}
}

// limitDenominator returns the fraction p/q nearest to x with 1 ≤ q ≤ maxQ,
// walking x's continued fraction to the last convergent within the bound
// and then weighing it against the best semiconvergent after it. x is
// positive and below 2^63; so p fits a uint64 (it is at most x·q rounded).
func limitDenominator(x *big.Rat, maxQ int64) (p, q uint64) {
	n, d := new(big.Int).Set(x.Num()), new(big.Int).Set(x.Denom())
	bound := big.NewInt(maxQ)
	p0, q0, p1, q1 := big.NewInt(0), big.NewInt(1), big.NewInt(1), big.NewInt(0)
	a, q2, t := new(big.Int), new(big.Int), new(big.Int)
	for d.Sign() != 0 {
		a.Quo(n, d)
		q2.Mul(a, q1).Add(q2, q0)
		if q2.Cmp(bound) > 0 {
			break
		}
		t.Mul(a, p1).Add(t, p0)
		p0, p1 = p1, new(big.Int).Set(t)
		q0, q1 = q1, new(big.Int).Set(q2)
		t.Mul(a, d)
		n, d = d, new(big.Int).Sub(n, t)
	}
	if d.Sign() == 0 { // x itself has a denominator within the bound
		return p1.Uint64(), q1.Uint64()
	}
	// The semiconvergent with the largest denominator within the bound.
	k := new(big.Int).Sub(bound, q0)
	k.Quo(k, q1)
	sp := new(big.Int).Mul(k, p1)
	sp.Add(sp, p0)
	sq := new(big.Int).Mul(k, q1)
	sq.Add(sq, q0)
	semi := new(big.Rat).SetFrac(sp, sq)
	conv := new(big.Rat).SetFrac(p1, q1)
	if distance(semi, x).Cmp(distance(conv, x)) < 0 {
		return sp.Uint64(), sq.Uint64()
	}
	return p1.Uint64(), q1.Uint64()
}

func distance(a, b *big.Rat) *big.Rat {
	d := new(big.Rat).Sub(a, b)
	return d.Abs(d)
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// maxSpan bounds the spans a State works with: a stretch of time this long
// or longer (about 73 years) is never reached, as the clocks of a Config
// read no further.
const maxSpan = 1<<61 - 1

// span is a stretch of ns + frac/num nanoseconds, frac < num, for the num
// of the ratio it was worked out for; ns == maxSpan means never.
type span struct {
	ns   int64
	frac uint64
}

// never reports whether s is beyond the reach of the clock.
func (s span) never() bool { return s.ns >= maxSpan }

// span returns the time that k credits take to accrue, k·den/num, exactly,
// or never if it is maxSpan or more. It is zero at an unlimited rate.
func (r ratio) span(k uint64) span {
	if r.inf || k == 0 {
		return span{}
	}
	hi, lo := bits.Mul64(k, r.den)
	if r.num == 1 { // a whole number of nanoseconds a credit, as for most rates
		if hi != 0 || lo >= maxSpan {
			return span{ns: maxSpan}
		}
		return span{ns: int64(lo)}
	}
	if hi >= r.num {
		return span{ns: maxSpan}
	}
	q, rem := bits.Div64(hi, lo, r.num)
	if q >= maxSpan {
		return span{ns: maxSpan}
	}
	return span{ns: int64(q), frac: rem}
}
