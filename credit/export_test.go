package credit

import "time"

// NewWithClock returns a bucket that reads its time, in nanoseconds from
// when it was made, from now instead of the monotonic clock, so that a
// test can move it backwards.
func NewWithClock(rate float64, burst, initial int64, now func() int64) *Bucket {
	c := newConfig(ratioOf(rate), rate, burst, time.Now(), func() int64 { return origin + now() })
	return c.MustNew(WithInitial(initial))
}

// Ratio returns the fraction rate is held as: num credits every den
// nanoseconds, or inf.
func Ratio(rate float64) (num, den uint64, inf bool) {
	r := ratioOf(rate)
	return r.num, r.den, r.inf
}
