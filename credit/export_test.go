package credit

// SetClock makes b read its time, in nanoseconds since its epoch, from now
// instead of the monotonic clock, so that a test can move it backwards.
func SetClock(b *Bucket, now func() int64) { b.clock = now }

// Ratio returns the fraction rate is held as: num credits every den
// nanoseconds, or inf.
func Ratio(rate float64) (num, den uint64, inf bool) {
	r := ratioOf(rate)
	return r.num, r.den, r.inf
}
