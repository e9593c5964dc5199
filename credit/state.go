package credit

import (
	"fmt"
	"math/big"
	"math/bits"
	"time"
)

// State is the state of one credit bucket of a Config, without the
// bucket: what a caller that keeps a bucket per key stores per key. Its
// methods take the Config and the time now, read from the Config's Now,
// and do the arithmetic of a Bucket; the caller serializes them (a State
// is a plain value, not safe for concurrent use) and keeps the waiters, if
// it has any.
//
// The zero State is a full bucket with nothing reserved, at every moment,
// under every Config; a State for which Full reports true may be dropped
// and replaced by the zero State later without changing any answer.
//
// # Representation
//
// A State is the generic cell rate algorithm's one time stamp, kept
// exactly: the moment e at which the bucket was, or would have been,
// empty, so that its balance at now is min(burst − reserved,
// ⌊(now − e)·rate⌋). Accrual needs no update: time moves now away from e.
// A spend of n moves e forward by the n credits' span, n·den/num
// nanoseconds; a reservation does too and counts n reserved; a release
// moves e back. A bucket that has reached its ceiling is capped: e is
// moved up to now − span(burst − reserved) by the first operation that
// looks, so time spent full is not banked. A span is rarely a whole number
// of nanoseconds, so e is kept as whole nanoseconds and a fraction in
// units of 1/num ns: no fraction of a credit is ever lost, however the
// bucket is looked at.
//
// A State is three words: e's nanoseconds, its fraction, and the credit
// reserved. The zero value marks full: e is never 0 otherwise, as a
// Config's clock reads 2^61 or more and a span is less than that.
type State struct {
	at       int64  // e, in whole nanoseconds on the Config's clock; 0: full
	frac     uint64 // e's fraction, in units of 1/num ns; below num
	reserved int64  // credit held by reservations
}

// newState returns the state of a bucket that holds balance credits at
// now, with no fraction.
func newState(c *Config, now, balance int64) State {
	if balance == c.burst {
		return State{}
	}
	var s State
	s.back(c.rate.num, c.at(now), c.rate.span(uint64(balance)))
	return s
}

// back sets e to now − d exactly, for a rate of numerator num (at the
// earliest 1, so that e never reads as the zero State's full).
func (s *State) back(num uint64, now int64, d span) {
	s.at, s.frac = now-d.ns, 0
	if d.frac != 0 {
		s.at--
		s.frac = num - d.frac
	}
	if s.at < 1 {
		s.at, s.frac = 1, 0
	}
}

// elapsedAtLeast reports whether now − e ≥ d: whether the credit of d has
// accrued by now. A d of never is never reached.
func (s *State) elapsedAtLeast(num uint64, now int64, d span) bool {
	if d.never() {
		return false
	}
	// now − e − d = D − (frac + d.frac)/num, with both fractions below num.
	D := now - s.at - d.ns
	switch {
	case D >= 2:
		return true
	case D == 1:
		return s.frac+d.frac <= num
	case D == 0:
		return s.frac == 0 && d.frac == 0
	}
	return false
}

// cap applies the ceiling at now: a bucket whose accrual since e has
// reached burst − reserved holds exactly that, with no fraction, from now
// on (time spent full is not banked). It requires now from c.at.
func (s *State) cap(c *Config, now int64) {
	limit := c.full
	if s.reserved != 0 {
		limit = c.rate.span(uint64(c.burst - s.reserved))
	}
	switch {
	case s.at == 0: // the zero State: full since forever
		if limit.never() {
			s.at, s.frac = 1, 0 // as full as the clock can tell
			return
		}
		s.back(c.rate.num, now, limit)
	case s.elapsedAtLeast(c.rate.num, now, limit):
		s.back(c.rate.num, now, limit)
	}
}

// forward moves e later by d (a spend or a reservation).
func (s *State) forward(num uint64, d span) {
	s.at += d.ns
	s.frac += d.frac
	if s.frac >= num {
		s.frac -= num
		s.at++
	}
}

// backward moves e earlier by d (credit given back), at the earliest to 1.
func (s *State) backward(num uint64, d span) {
	s.at -= d.ns
	if s.frac < d.frac {
		s.frac += num - d.frac
		s.at--
	} else {
		s.frac -= d.frac
	}
	if s.at < 1 {
		s.at, s.frac = 1, 0
	}
}

// spanOf returns the span of n credits under c, the common one and the
// burst worked out already.
func (c *Config) spanOf(n int64) span {
	switch n {
	case 1:
		return c.one
	case c.burst:
		return c.full
	}
	return c.rate.span(uint64(n))
}

// TrySpend takes n credits for good if the balance at now covers them, and
// reports whether it did. It fails, changing nothing the balance shows, if
// n < 0, if n is more than the burst less the credit reserved, and if the
// balance is short. TrySpend(c, now, 0) succeeds.
func (s *State) TrySpend(c *Config, now, n int64) bool {
	c.check("State.TrySpend")
	_, ok := s.take(c, now, now, n)
	return ok
}

// TrySpendSince is TrySpend for a caller that has waited for the credit
// since the moment since, at the front of a line of waiters, and looks
// again at now: if the credit accrued at some moment between since and
// now, it is taken at the first whole nanosecond it was there, as if the
// caller had woken then. So a stream of waiting spends keeps the rate
// however late each wakes, while a bucket that sat full with nobody
// waiting still banks nothing: its ceiling applies at since.
//
// It is a run-time error if since is after now; TrySpendSince then panics
// and changes nothing.
func (s *State) TrySpendSince(c *Config, since, now, n int64) bool {
	c.check("State.TrySpendSince")
	checkSince("TrySpendSince", since, now)
	_, ok := s.take(c, since, now, n)
	return ok
}

// checkSince panics, naming op, if since is after now: a caller that looks
// at a moment before the one it says it has waited since would take credit
// that has not accrued.
func checkSince(op string, since, now int64) {
	if since > now {
		panic(fmt.Sprintf("credit: State.%s with since %d after now %d", op, since, now))
	}
}

// take is TrySpendSince, which also returns the moment the credit was
// taken at (now, if c accrues nothing).
func (s *State) take(c *Config, since, now, n int64) (int64, bool) {
	if n <= 0 || n > c.burst-s.reserved {
		return now, n == 0
	}
	realNow := now
	since, now = c.at(since), c.at(now)
	s.cap(c, since)
	d := c.spanOf(n)
	if !s.elapsedAtLeast(c.rate.num, now, d) {
		return realNow, false
	}
	if since == now { // a look at one moment: the credit is taken then
		s.forward(c.rate.num, d)
		return realNow, true
	}
	// The credit is taken at the moment it accrued, since or later, and
	// reported at the first whole nanosecond at or after it. No ceiling
	// applies after since: if the credit accrued after since, the balance
	// was below n, and so below the ceiling, until that moment. Capping at
	// the whole nanosecond instead would drop the fraction between the
	// two, a little under a nanosecond a credit that a stream of spends on
	// a bucket of burst n would lose for good.
	t := *s
	t.forward(c.rate.num, d)
	at := t.at
	if t.frac != 0 {
		at++
	}
	at = max(at, since)
	s.forward(c.rate.num, d)
	if c.frozen {
		at = realNow
	}
	return at, true
}

// TryReserve reserves n credits if the balance at now covers them, as
// TrySpend takes them, and reports whether it did: the reserved credit
// counts against the burst until Release gives it back or Forget spends
// it. It fails, changing nothing the balance shows, as TrySpend does.
func (s *State) TryReserve(c *Config, now, n int64) bool {
	c.check("State.TryReserve")
	return s.tryReserveSince(c, now, now, n)
}

// TryReserveSince is TryReserve for a caller that has waited since the
// moment since, as TrySpendSince is TrySpend's. It is a run-time error if
// since is after now.
func (s *State) TryReserveSince(c *Config, since, now, n int64) bool {
	c.check("State.TryReserveSince")
	checkSince("TryReserveSince", since, now)
	return s.tryReserveSince(c, since, now, n)
}

func (s *State) tryReserveSince(c *Config, since, now, n int64) bool {
	_, ok := s.reserve(c, since, now, n)
	return ok
}

// reserve is TryReserveSince, which also returns the moment the credit was
// taken at, as take does.
func (s *State) reserve(c *Config, since, now, n int64) (int64, bool) {
	at, ok := s.take(c, since, now, n)
	if ok {
		s.reserved += n
	}
	return at, ok
}

// Release gives n reserved credits back to the balance at now.
//
// It is a run-time error if n is negative or more than the credit
// reserved; Release then panics and changes nothing.
func (s *State) Release(c *Config, now, n int64) {
	c.check("State.Release")
	s.checkSettle("Release", n)
	now = c.at(now)
	s.cap(c, now)
	s.backward(c.rate.num, c.spanOf(n))
	s.reserved -= n
}

// Forget spends n reserved credits for good at now: they stop counting
// against the burst, and the bucket accrues again if it was full.
//
// It is a run-time error if n is negative or more than the credit
// reserved; Forget then panics and changes nothing.
func (s *State) Forget(c *Config, now, n int64) {
	c.check("State.Forget")
	s.checkSettle("Forget", n)
	s.cap(c, c.at(now))
	s.reserved -= n
}

func (s *State) checkSettle(op string, n int64) {
	if n < 0 || n > s.reserved {
		panic(fmt.Sprintf("credit: State.%s of %d credits with %d reserved", op, n, s.reserved))
	}
}

// Balance returns the credit available at now: min(burst − reserved,
// ⌊(now − e)·rate⌋), and 0 if now is before e.
func (s *State) Balance(c *Config, now int64) int64 {
	c.check("State.Balance")
	if s.at == 0 {
		return c.burst - s.reserved
	}
	now = c.at(now)
	t := *s
	t.cap(c, now)
	limit := c.burst - t.reserved
	if c.rate.inf {
		return limit
	}
	// now − e = d + g/num nanoseconds.
	d, g := now-t.at, uint64(0)
	if t.frac != 0 {
		d, g = d-1, c.rate.num-t.frac
	}
	if d < 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(d), c.rate.num)
	var carry uint64
	lo, carry = bits.Add64(lo, g, 0)
	hi += carry
	if hi >= c.rate.den {
		return limit
	}
	q, _ := bits.Div64(hi, lo, c.rate.den)
	if q >= uint64(limit) {
		return limit
	}
	return int64(q)
}

// Reserved returns the credit reserved.
func (s *State) Reserved() int64 { return s.reserved }

// Full reports whether the bucket is full at now with nothing reserved:
// indistinguishable from the zero State from now on.
func (s *State) Full(c *Config, now int64) bool {
	c.check("State.Full")
	return s.reserved == 0 && s.Balance(c, now) == c.burst
}

// Wait returns how long from now until accrual alone raises the balance
// to n, 0 if it covers n already, and false if accrual alone never will:
// n is negative or more than the burst less the credit reserved, the rate
// is zero and the balance short, or the moment lies beyond the clock's
// reach. Credit given back by Release can only make the wait shorter.
func (s *State) Wait(c *Config, now, n int64) (time.Duration, bool) {
	c.check("State.Wait")
	if n < 0 || n > c.burst-s.reserved {
		return 0, false
	}
	now = c.at(now)
	t := *s
	t.cap(c, now)
	d := c.spanOf(n)
	if t.elapsedAtLeast(c.rate.num, now, d) {
		return 0, true
	}
	if c.frozen || d.never() {
		return 0, false
	}
	t.forward(c.rate.num, d) // t.at is now when the credit is there, rounded down
	at := t.at
	if t.frac != 0 {
		at++
	}
	return time.Duration(at - now), true
}

// Rerate carries the state from Config from to Config to at now, for a
// change of rate (to is from.WithRate). The accrual up to now is settled
// at from's rate, and the fraction of a credit accrued carries over,
// rounded down to the nanosecond at to's rate, so that the change neither
// mints nor loses a whole credit.
func (s *State) Rerate(from, to *Config, now int64) {
	from.check("State.Rerate")
	to.check("State.Rerate")
	balance := s.Balance(from, now)
	// The fraction of a credit accrued beyond balance, as the time to's
	// rate takes to accrue it.
	var carried int64
	t := *s
	t.cap(from, from.at(now))
	if balance < from.burst-t.reserved && !from.frozen && !from.rate.inf && !to.frozen && !to.rate.inf {
		carried = carryOver(from.rate, to.rate, from.at(now), &t, balance)
	}
	reserved := s.reserved
	*s = State{reserved: reserved}
	if to.rate.inf {
		s.at = 1
		s.cap(to, to.at(now))
		return
	}
	nowTo := to.at(now)
	s.back(to.rate.num, nowTo, to.rate.span(uint64(balance)))
	s.backward(to.rate.num, span{ns: carried})
}

// carryOver returns, in whole nanoseconds rounded down, the time rate next
// takes to accrue the fraction of a credit that t holds beyond balance at
// now under rate prev.
func carryOver(prev, next ratio, now int64, t *State, balance int64) int64 {
	// (now − e)·num − balance·den, in units of 1/num ns · num = credits·den:
	// the fraction is rem/prev.den credits.
	el := new(big.Int).Mul(big.NewInt(now-t.at), new(big.Int).SetUint64(prev.num))
	el.Sub(el, new(big.Int).SetUint64(t.frac))
	el.Sub(el, new(big.Int).Mul(big.NewInt(balance), new(big.Int).SetUint64(prev.den)))
	if el.Sign() <= 0 {
		return 0
	}
	// At next it takes rem/prev.den · next.den/next.num nanoseconds.
	el.Mul(el, new(big.Int).SetUint64(next.den))
	el.Quo(el, new(big.Int).Mul(new(big.Int).SetUint64(prev.den), new(big.Int).SetUint64(next.num)))
	if !el.IsInt64() {
		return 0
	}
	return el.Int64()
}
