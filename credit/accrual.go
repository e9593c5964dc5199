package credit

import (
	"math"
	"math/big"
	"time"
)

// Minting the accrual.
//
// The credit due for the time since accrual started is added to the
// semaphore with Refill by one goroutine at a time, the holder of mu, which
// first claims the interval (it advances minted under mu) and then adds
// the credit. A claim that was only a compare-and-swap on a time stamp
// would let two minters add disjoint intervals, each capped by the room it
// saw, and a spend between the two refills would make room for both: the
// bucket would then hold credit that the ceiling should have discarded.
// Holding mu across the claim and the refill rules that out, and keeps the
// balance plus the credit being minted within the burst at every moment.
//
// The spends themselves stay lock-free (one compare-and-swap on the
// semaphore), so the one thing a spend must tell the accrual is that it
// took credit out of a full bucket, which restarts accrual then: a minter
// that fills the bucket sets the phase word to full before it lets go of
// mu, and a spend that finds the phase full after its compare-and-swap
// records a restart at its time. The minter, for its part, looks at the
// limit again after setting full: a spend that slipped in between saw
// neither full nor a filled bucket's room, so one of the two always sees
// the other (both write, then read the other's word).

// settleLocked mints the credit accrued since the last mint, up to the
// burst, and, if take > 0, also spends take credits for good when the
// balance with what it mints covers them. It reports whether it spent them.
// It requires b.mu.
func (b *Bucket) settleLocked(take int64) bool {
	now := b.now()
	ph := phase(b.phase.Load())
	if ph == full {
		if limit, _ := b.sem.TryForget(0); limit >= b.burst {
			// Nothing accrues while full. Credit taken out of it
			// restarts accrual, at a time read after the spend.
			if take == 0 {
				return false
			}
			if _, ok := b.sem.TryForget(take); !ok {
				return false
			}
			b.restartLocked()
			return true
		}
		// Credit has left the full bucket, and the spend's restart has
		// not landed yet. Restart here, at a time read after seeing the
		// room, so not before the spend; the spend's own compare-and-swap
		// then finds the phase moved and does nothing.
		now = b.now()
		b.phase.CompareAndSwap(uint64(full), uint64(restartAt(now)))
		ph = phase(b.phase.Load())
	}
	if ph.restarting() {
		b.origin, b.minted = ph.at(), 0
		b.phase.Store(uint64(accruing)) // only a holder of mu moves it on from a restart
	}

	due := b.dueLocked(now)
	limit, _ := b.sem.TryForget(0)
	room := b.burst - limit // the limit only falls while mu is held, so room only grows
	if due == 0 || room <= 0 {
		if take == 0 {
			return false
		}
		_, ok := b.sem.TryForget(take) // not full (P1), so not a spend from full
		return ok
	}
	fills := due >= uint64(room)
	add := room
	if !fills {
		add = int64(due)
	}

	// Spend from what is minted first, then from the balance.
	took, spendFromSem := false, false
	switch {
	case take == 0:
	case add >= take:
		took, add = true, add-take
	default:
		if _, ok := b.sem.TryForget(take - add); ok {
			took, spendFromSem, add = true, true, 0
		}
	}
	if add > 0 {
		b.sem.Refill(add) // room only grows, so all of add fits
	}

	switch {
	case !fills:
		b.minted += due
		b.rebaseLocked()
	case took:
		// The accrual filled the bucket and the spend took credit out
		// of it: accrual starts again from the spend. With nothing
		// changed in the semaphore but by this call, or only the refill
		// of what was left, the spend happened at now, when the accrual
		// was read; one that took from the balance happened later.
		if spendFromSem {
			now = b.now()
		}
		b.origin, b.minted = now, 0
	default:
		b.phase.Store(uint64(full))
		if limit, _ := b.sem.TryForget(0); limit < b.burst {
			// A spend slipped in between the refill and the store.
			b.restartLocked()
		}
	}
	return took
}

// restartLocked records a restart at the present moment if the phase is
// full, and wakes the waiter at the front to look again. It requires b.mu.
func (b *Bucket) restartLocked() {
	if b.phase.CompareAndSwap(uint64(full), uint64(restartAt(b.now()))) {
		b.pokeLocked()
	}
}

// spent is called after credit has left the bucket for good without mu: if
// it left a full bucket, accrual restarts now, and a waiter parked with no
// accrual to wait for is woken to look again.
func (b *Bucket) spent() {
	if phase(b.phase.Load()) == full {
		b.restart()
	}
}

// restart is spent's slow path, outlined so that spent inlines.
func (b *Bucket) restart() {
	if b.phase.CompareAndSwap(uint64(full), uint64(restartAt(b.now()))) && b.waiting.Load() != 0 {
		b.mu.Lock()
		b.pokeLocked()
		b.mu.Unlock()
	}
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
	if phase(b.phase.Load()) != accruing {
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
