package credit

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/atomicsem/atomicsem/atomicsem"
)

// Config is a rate and a burst, validated, with the rate's exact
// representation worked out once: the configuration that any number of
// buckets share. Buckets made from one Config with its New cost no more
// than the allocation of the Bucket itself, and a caller that keeps one
// bucket per key can keep only a State per key and the Config once (see
// State).
//
// A Config is immutable and safe for concurrent use. Its clock (Now) reads
// the monotonic clock, in nanoseconds from an origin that lies 2^61 ns
// (about 73 years) before the Config was made, so that a State can say a
// bucket was empty that long ago, and reads times for about 219 years
// after it is made.
//
// The zero Config is not usable: its methods, and the State methods given
// it, panic. Make one with NewConfig or MustConfig.
type Config struct {
	rate  ratio   // the rate, exactly; for a rate of zero see frozen
	rateF float64 // the rate as given
	burst int64

	// frozen is set for a rate of zero. A bucket that accrues nothing is a
	// bucket whose clock stands still: its State is kept at one credit a
	// nanosecond against a clock that always reads frozenNow, so that the
	// same arithmetic spends, reserves and caps it.
	frozen bool

	// one and full are the spans of one credit and of the burst, worked
	// out once because a spend needs both.
	one, full span

	// epoch is the moment the Config's clock reads origin; it is shared
	// by every Config derived from this one (WithRate), so that a State
	// keeps its meaning across a change of rate.
	epoch time.Time
	// clock, if set, replaces the monotonic clock (tests only).
	clock func() int64
}

// origin is what a Config's clock reads at its epoch: a State can tell a
// bucket empty as long ago as the longest span (maxSpan) before that.
const origin = 1 << 61

// frozenNow is the clock of a Config whose rate is zero: any moment later
// than the largest span a full bucket can take (see span), so that the
// zero State is full there too.
const frozenNow = origin

// NewConfig returns the configuration of a bucket that accrues rate credits
// per second up to burst. rate may be 0 (a bucket only spends what it
// holds) or math.Inf(1) (no limit).
//
// The rate is held as the fraction of whole numbers p/q credits per second
// nearest to it with q ≤ 10^9: exactly, for rates such as 10, 7.3, 1.0/3
// and 1.0/3600, and otherwise within 10^-9 credits per second (less than
// one credit in 30 years). Rates below one credit in 63 years count as 0.
//
// NewConfig returns ErrInvalidRate for a negative or NaN rate and
// ErrInvalidBurst for a burst outside [1, atomicsem.MaxPermits] or one
// that takes MaxFill or longer to accrue at the rate.
func NewConfig(rate float64, burst int64) (*Config, error) {
	if err := checkRate(rate); err != nil {
		return nil, err
	}
	if err := checkBurst(burst); err != nil {
		return nil, err
	}
	c := newConfig(ratioOf(rate), rate, burst, time.Now(), nil)
	if err := c.checkFill(ErrInvalidBurst); err != nil {
		return nil, err
	}
	return c, nil
}

// MaxFill is the longest a bucket may take to fill from empty: 2^61 − 1
// nanoseconds, about 73 years, as far back as a Config's clock reaches.
// A State is the moment its bucket was empty; a full bucket from which one
// credit is spent was empty the fill time before, a moment the clock must
// be able to name. So NewConfig refuses a rate and burst whose burst takes
// MaxFill or longer to accrue (10^-5 credits a second and a burst of
// 2^30 − 1 would take 3.4 million years), and WithRate and SetRate refuse
// such a rate, rather than start a bucket short of full or wait forever
// for a burst. Rates below one credit in 63 years count as zero, which
// accrues nothing and has no fill time.
const MaxFill = time.Duration(maxSpan)

// checkFill returns kind, wrapped with the numbers, if c's burst takes
// MaxFill or longer to accrue.
func (c *Config) checkFill(kind error) error {
	if c.frozen || !c.full.never() {
		return nil
	}
	years := float64(c.burst) / c.rateF / (365.25 * 24 * 3600)
	return fmt.Errorf("%w: a burst of %d takes %.3g years to accrue at %v credits per second, more than MaxFill (%.0f years)",
		kind, c.burst, years, c.rateF, MaxFill.Hours()/(365.25*24))
}

// MustConfig is like NewConfig but panics if the arguments are invalid. It
// simplifies the initialisation of package-level configurations.
func MustConfig(rate float64, burst int64) *Config {
	c, err := NewConfig(rate, burst)
	if err != nil {
		panic(err)
	}
	return c
}

func newConfig(r ratio, rateF float64, burst int64, epoch time.Time, clock func() int64) *Config {
	c := &Config{rate: r, rateF: rateF, burst: burst, epoch: epoch, clock: clock}
	switch {
	case r.inf:
		c.rate = ratio{num: 1, den: 1, inf: true} // spans of zero, a fraction of none
	case r.num == 0:
		c.frozen = true
		c.rate = ratio{num: 1, den: 1} // one credit a nanosecond, on a clock that stands still
	}
	c.one = c.rate.span(1)
	c.full = c.rate.span(uint64(burst))
	return c
}

// WithRate returns a configuration of the same burst and clock as c at
// another rate, or ErrInvalidRate for a negative or NaN rate and for one
// at which the burst takes MaxFill or longer to accrue. A State kept under
// c is carried to it with State.Rerate.
func (c *Config) WithRate(rate float64) (*Config, error) {
	c.check("WithRate")
	if err := checkRate(rate); err != nil {
		return nil, err
	}
	next := newConfig(ratioOf(rate), rate, c.burst, c.epoch, c.clock)
	if err := next.checkFill(ErrInvalidRate); err != nil {
		return nil, err
	}
	return next, nil
}

// Rate returns the rate in credits per second, as given.
func (c *Config) Rate() float64 {
	c.check("Rate")
	return c.rateF
}

// Burst returns the burst.
func (c *Config) Burst() int64 {
	c.check("Burst")
	return c.burst
}

// Now returns the time on c's clock: nanoseconds from its origin, read from
// the monotonic clock. The State methods take their now from it.
func (c *Config) Now() int64 {
	c.check("Now")
	if c.clock != nil {
		return c.clock() // it reads from origin (see NewWithClock)
	}
	return origin + int64(time.Since(c.epoch))
}

// check panics, naming op, if c is nil or the zero Config: caller bugs
// that would otherwise surface as a nil dereference far from the call, or
// as a bucket of burst 0.
func (c *Config) check(op string) {
	if c == nil {
		panic("credit: " + op + " with a nil *Config")
	}
	if c.burst == 0 {
		panic("credit: " + op + " with a zero Config; make one with NewConfig")
	}
}

// at returns the moment that a State is looked at for, now on c's clock:
// now itself, or frozenNow if c accrues nothing.
func (c *Config) at(now int64) int64 {
	if c.frozen {
		return frozenNow
	}
	return now
}

func checkRate(rate float64) error {
	if rate < 0 || math.IsNaN(rate) {
		return fmt.Errorf("%w: %v credits per second", ErrInvalidRate, rate)
	}
	return nil
}

func checkBurst(burst int64) error {
	if burst < 1 || burst > atomicsem.MaxPermits {
		return fmt.Errorf("%w: burst %d is outside [1, %d]", ErrInvalidBurst, burst, atomicsem.MaxPermits)
	}
	return nil
}

// lastConfig is the configuration New made last. New with the same rate
// and burst shares it, so that a caller making many buckets of one rate
// with New pays for the rate's exact representation once.
var lastConfig atomic.Pointer[Config]

// configFor returns a configuration for rate and burst, which checkRate
// and checkBurst have passed: the last one made if it matches, else a new
// one, or ErrInvalidBurst if the burst takes MaxFill or longer to accrue.
func configFor(rate float64, burst int64) (*Config, error) {
	if c := lastConfig.Load(); c != nil && c.burst == burst && c.rateF == rate && c.clock == nil {
		return c, nil
	}
	c := newConfig(ratioOf(rate), rate, burst, time.Now(), nil)
	if err := c.checkFill(ErrInvalidBurst); err != nil {
		return nil, err
	}
	lastConfig.Store(c)
	return c, nil
}
