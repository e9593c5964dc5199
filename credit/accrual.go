package credit

import (
	"math"
	"math/big"
	"time"
	"weak"
)

// Settling the accrual.
//
// The credit due for the time since accrual started is added to the
// semaphore with Refill by one goroutine at a time, the holder of mu, which
// advances minted and adds the credit under it (settleLocked). A claim that
// was only a compare-and-swap on a time stamp would let two minters add
// disjoint intervals, each capped by the room it saw, and a spend between
// their refills would make room for both: the bucket would then hold
// credit that the ceiling should have discarded.
//
// The spends stay lock-free, one compare-and-swap on the semaphore, and a
// spend that finds enough credit reads no clock, so a settle does not know
// when the spends since the last one happened. It takes them all to have
// happened at its own moment, after the accrual: it caps the accrual by
// the room there was at the last settle (burst − lastLimit), and only then
// takes the spends off. A spend that happened earlier could only have left
// more room for the accrual, so this never credits more than the bucket
// would have held; where the bucket filled in between, credit that left it
// restarts accrual at the settle, a little late.
//
// So that this costs nothing in the common case, the bucket is never left
// unmarked for long once it fills: a settle that leaves it short arms a
// timer (fill) for the moment the accrual will fill it, at the earliest
// minFillDelay later, and the timer settles it, which marks it full. While
// full is set, a spend reads the clock after all: it settles the accrual
// at once, which restarts it then, so time spent full is never banked.
// The settle that sets full looks at the limit again after setting it: a
// spend in between saw neither the flag nor the settle's result, and this
// way one of the two sees the other (both write, then read the other's
// word).

// minFillDelay is the least delay of the fill timer. A bucket that fills
// sooner than this after being settled is marked full at this delay, and a
// spend in between restarts accrual that much later than it should: the
// credit of at most this long is lost. It bounds the timer to ten thousand
// firings a second for a bucket drained as fast as it fills.
const minFillDelay = 100 * time.Microsecond

// settleLocked mints the credit accrued since the last settle, up to the
// room there was then, and, if take > 0, also spends take credits for good
// when the balance with what it mints covers them. It reports whether it
// spent them. It requires b.mu.
func (b *Bucket) settleLocked(take int64) bool {
	now := b.now()
	limit, _ := b.sem.TryForget(0)
	spent := b.lastLimit - limit // spends since the last settle: only they lower the limit
	wasFull := b.full.Load()

	// The accrual, up to the room left by the last settle.
	var mint int64
	fills := wasFull
	if !wasFull {
		due := b.dueLocked(now)
		if room := b.burst - b.lastLimit; due >= uint64(room) {
			mint, fills = room, true
		} else {
			mint = int64(due)
			b.minted += due
			b.rebaseLocked()
		}
	}

	// Spend from what is minted first, then from the balance.
	took, fromBalance := false, int64(0)
	if take > 0 {
		if mint >= take {
			took, mint = true, mint-take
		} else if _, ok := b.sem.TryForget(take - mint); ok {
			took, fromBalance, mint = true, take-mint, 0
		}
	}
	if mint > 0 {
		b.sem.Refill(mint) // the limit has only fallen since lastLimit, so all of it fits
	}
	b.lastLimit = limit + mint - fromBalance

	switch {
	case fills && (spent > 0 || took):
		// The bucket was full and credit has left it: accrual starts
		// again. The spends since the last settle are taken to be now,
		// and so is one from what was minted; one from the balance came
		// after now.
		if fromBalance > 0 {
			now = b.now()
		}
		b.origin, b.minted = now, 0
		if wasFull {
			b.full.Store(false)
			b.pokeLocked()
		}
	case fills:
		b.full.Store(true)
		if limit, _ := b.sem.TryForget(0); limit < b.lastLimit {
			// A spend slipped in between the read of the limit and the
			// store, and saw neither.
			b.lastLimit = limit
			b.restartLocked(b.now())
		}
	}
	if !b.full.Load() {
		b.armFillLocked(now)
	}
	return took
}

// restartLocked starts accrual afresh at now, with no fraction carried,
// and wakes the waiter at the front to look again. It requires b.mu.
func (b *Bucket) restartLocked(now int64) {
	b.origin, b.minted = now, 0
	b.full.Store(false)
	b.pokeLocked()
}

// spent is called after credit has left the bucket for good without mu: if
// it left a full bucket, the accrual is settled at once, which restarts it
// now.
func (b *Bucket) spent() {
	if b.full.Load() {
		b.settleSpent()
	}
}

// settleSpent is spent's slow path, outlined so that spent inlines.
func (b *Bucket) settleSpent() {
	b.mu.Lock()
	b.settleLocked(0)
	b.mu.Unlock()
}

// armFillLocked sets the fill timer for the moment the accrual will fill
// the room the last settle left, unless it is set for that moment or
// sooner already (a timer that fires early only settles again). It
// requires b.mu, and that the bucket is not full.
func (b *Bucket) armFillLocked(now int64) {
	if b.fillAt != 0 && b.fillAt <= now+int64(minFillDelay) {
		return // set for the earliest moment it could be set for, or sooner
	}
	room := b.burst - b.lastLimit
	if room <= 0 || b.rate.inf || b.rate.num == 0 {
		return
	}
	d, ok := b.rate.timeFor(b.minted + uint64(room))
	if !ok || d > maxWait-b.origin {
		return // never, as far as the clock reaches
	}
	at := max(b.origin+d, now+int64(minFillDelay))
	if b.fillAt != 0 && b.fillAt <= at {
		return
	}
	b.fillAt = at
	if b.fill == nil {
		// The timer holds the bucket weakly, so that a bucket dropped
		// while it accrues is not kept alive until it would have filled.
		w := weak.Make(b)
		b.fill = time.AfterFunc(time.Duration(at-now), func() {
			if b := w.Value(); b != nil {
				b.onFill()
			}
		})
		return
	}
	b.fill.Reset(time.Duration(at - now))
}

// onFill is the fill timer's function: it settles the accrual, which
// marks the bucket full if it is, or sets the timer again.
func (b *Bucket) onFill() {
	b.mu.Lock()
	b.fillAt = 0
	b.settleLocked(0)
	b.mu.Unlock()
}

// pokeLocked cancels the park of the waiter at the front, if it is parked,
// so that it settles the accrual again and re-arms its timer. It requires
// b.mu.
func (b *Bucket) pokeLocked() {
	if b.poke != nil {
		b.poke()
		b.poke = nil
	}
}

// dueLocked returns the whole credits accrued since origin and not yet
// minted, as of now; none if the clock reads before the last mint, and
// without limit at an infinite rate, however little time has passed. It
// requires b.mu.
func (b *Bucket) dueLocked(now int64) uint64 {
	if b.rate.inf {
		return math.MaxUint64
	}
	d := now - b.origin
	if d <= 0 {
		return 0
	}
	c := b.rate.credits(uint64(d))
	if c <= b.minted {
		return 0
	}
	return c - b.minted
}

// rebaseThreshold is the count of credits minted since origin above which
// origin moves forward by whole periods of the rate, so that minted, and
// the accrual computed from it, never overflow however long the bucket
// drains without filling.
const rebaseThreshold = 1 << 40

// rebaseLocked moves origin forward by whole periods of the rate when
// minted is large. A period accrues a whole number of credits exactly, so
// nothing of the fraction is lost. It requires b.mu.
func (b *Bucket) rebaseLocked() {
	if b.minted < rebaseThreshold || b.rate.inf || b.rate.num == 0 {
		return
	}
	ns, credits := b.rate.period()
	m := b.minted / credits
	b.origin += int64(m * ns) // m whole periods lie within now − origin
	b.minted -= m * credits
}

// carry returns how far back from now accrual at rate next must start
// for it to hold the fraction of a credit that accrued at rate prev in the
// elapsed nanoseconds since origin, beyond the minted credits: the time
// next takes to accrue that fraction, rounded down, so that the change of
// rate never adds credit.
func carry(prev, next ratio, elapsed int64, minted uint64) int64 {
	if prev.inf || prev.num == 0 || next.inf || next.num == 0 || elapsed <= 0 {
		return 0
	}
	// The fraction is rem/prev.den credits, rem = elapsed·num − minted·den.
	rem := new(big.Int).Mul(big.NewInt(elapsed), new(big.Int).SetUint64(prev.num))
	rem.Sub(rem, new(big.Int).Mul(new(big.Int).SetUint64(minted), new(big.Int).SetUint64(prev.den)))
	if rem.Sign() <= 0 {
		return 0
	}
	// At next it takes rem/prev.den · next.den/next.num nanoseconds.
	d := rem.Mul(rem, new(big.Int).SetUint64(next.den))
	d.Quo(d, new(big.Int).Mul(new(big.Int).SetUint64(prev.den), new(big.Int).SetUint64(next.num)))
	if !d.IsInt64() {
		return 0
	}
	return d.Int64()
}

// wakeLocked returns when the accrual alone will have raised the balance
// to n, or filled the bucket if that comes first, for the waiter at the
// front to arm its timer; and false if accrual cannot help it (the rate is
// zero, the bucket is full, or the moment lies beyond the clock's range).
// It requires b.mu, with the accrual just settled.
func (b *Bucket) wakeLocked(n int64) (time.Time, bool) {
	if b.full.Load() {
		return time.Time{}, false
	}
	st := b.sem.Stats()
	need := n - st.Available
	c := min(need, b.burst-st.Limit)
	if need <= 0 {
		return b.epoch.Add(time.Duration(b.now())), true // look again at once
	}
	if c <= 0 {
		return time.Time{}, false // only credit given back can help
	}
	d, ok := b.rate.timeFor(b.minted + uint64(c))
	if !ok || d > maxWait-b.origin {
		return time.Time{}, false
	}
	return b.epoch.Add(time.Duration(b.origin + d)), true
}

// maxWait bounds the timers a waiter arms: a moment further than this from
// the epoch (about 146 years) is never, and the waiter waits for its
// context alone.
const maxWait = 1 << 62
