// Package state defines the semaphore's packed state word and its
// transitions as pure functions, so that the compare-and-swap loops in
// package atomicsem, the fuzz targets and the tests all share one definition.
package state

import "github.com/atomicsem/atomicsem/internal/mutant"

// The state word.
//
// All counting state of a Semaphore lives in one uint64, changed only by
// compare-and-swap: load, decode, decide, rebuild, CAS, retry on failure.
//
//	 63       62      61      60 ........ 41   40 ........ 21   20 ......... 0
//	+--------+-------+-------+--------------+----------------+---------------+
//	|starving|closed |waiters|   max (20)   |   total (20)   | count (21, ±) |
//	+--------+-------+-------+--------------+----------------+---------------+
//
//	count    permits available now; two's complement, negative while the
//	         limit is below what tokens hold ("debt")
//	total    the live limit: permits in circulation, available plus held
//	max      the ceiling fixed by New; total never exceeds it
//	waiters  set while the wait queue is non-empty
//	closed   set by Close, never cleared
//	starving barging mode only: a waiter has waited past the starvation
//	         bound, so arrivals queue and releases hand off
//
// Invariants (checked by CheckInvariants, the fuzz targets and the SPIN model):
//
//	I1  0 ≤ total ≤ max ≤ MaxPermits
//	I2  count ≤ total, i.e. held = total − count ≥ 0
//	I3  held ≤ max, hence count ≥ −MaxPermits and count fits in 21 bits
//	I4  held equals the sum of the permits of live tokens
//	I5  closed, once set, stays set
//	I6  with the queue lock free, waiters is set iff the queue is non-empty
//	I7  starving is never set in FIFO mode
//
// A transition that would break I1–I3 is refused (ok == false) and changes
// nothing. Every transition rebuilds the word from decoded fields with the
// helpers below, so no flag bit can be dropped on the way.

// MaxPermits is the widest value a field of the word holds.
const MaxPermits = 1<<limitBits - 1

const (
	countBits = 21
	limitBits = 20

	totalShift = countBits
	maxShift   = totalShift + limitBits

	countMask = 1<<countBits - 1
	limitMask = 1<<limitBits - 1

	WaitersBit  Word = 1 << 61 // the wait queue is non-empty
	ClosedBit   Word = 1 << 62 // Close was called
	StarvingBit Word = 1 << 63 // barging mode: hand off until the old waiter is served
)

// Word is a packed semaphore state.
type Word uint64

// New packs the fields into a word. It requires that they satisfy I1–I3.
func New(count, total, max int64) Word {
	return Word(uint64(count)&countMask) |
		Word(total)<<totalShift |
		Word(max)<<maxShift
}

func (s Word) Count() int64 { return int64(s<<(64-countBits)) >> (64 - countBits) }
func (s Word) Total() int64 { return int64(s>>totalShift) & limitMask }
func (s Word) Max() int64   { return int64(s>>maxShift) & limitMask }
func (s Word) Held() int64  { return s.Total() - s.Count() }

func (s Word) Waiters() bool  { return s&WaitersBit != 0 }
func (s Word) Closed() bool   { return s&ClosedBit != 0 }
func (s Word) Starving() bool { return s&StarvingBit != 0 }

// withCount returns s with count replaced; every other bit is kept.
func (s Word) WithCount(count int64) Word {
	if mutant.Active == mutant.DropClosed {
		s &^= ClosedBit // fault for scripts/mutants.sh; compiled out otherwise
	}
	return s&^countMask | Word(uint64(count)&countMask)
}

// withTotal returns s with total and count replaced; every other bit is kept.
func (s Word) WithTotal(total, count int64) Word {
	return s&^(countMask|limitMask<<totalShift) |
		Word(uint64(count)&countMask) |
		Word(total)<<totalShift
}

// withFlag returns s with the flag bit set or cleared.
func (s Word) WithFlag(flag Word, on bool) Word {
	if on {
		return s | flag
	}
	return s &^ flag
}

// The transitions. Each is a pure function of the old word and its argument:
// it returns the word to install and whether the operation may happen at
// all. Callers have already rejected arguments outside [0, MaxPermits].

// acquire takes n permits if none of the flags in block is set and n are
// available.
func (s Word) Acquire(n int64, block Word) (Word, bool) {
	if s&block != 0 || s.Count() < n {
		return s, false
	}
	return s.WithCount(s.Count() - n), true
}

// release returns n held permits.
func (s Word) Release(n int64) (Word, bool) {
	if n > s.Held() {
		return s, false
	}
	return s.WithCount(s.Count() + n), true
}

// forget removes n held permits from circulation: held falls by n, total
// falls by n but not below zero, and count = total − held throughout.
func (s Word) Forget(n int64) (Word, bool) {
	held := s.Held()
	if n > held {
		return s, false
	}
	total := max(s.Total()-n, 0)
	if mutant.Active == mutant.Stale {
		return s.WithTotal(total, s.Total()-(held-n)), true // fault: count from the old total
	}
	return s.WithTotal(total, total-(held-n)), true
}

// tryRelease adds n new permits if the total stays within max.
func (s Word) TryRelease(n int64) (Word, bool) {
	if mutant.Active == mutant.TryReleaseIgnoresHeld {
		return s.tryReleaseIgnoringHeld(n)
	}
	if n <= 0 || s.Closed() || s.Total()+n > s.Max() {
		return s, false
	}
	return s.WithTotal(s.Total()+n, s.Count()+n), true
}

// tryReleaseIgnoringHeld is TryRelease with a fault for scripts/mutants.sh:
// its check counts only the available permits against max, forgetting the
// ones that tokens hold.
func (s Word) tryReleaseIgnoringHeld(n int64) (Word, bool) {
	if n <= 0 || s.Closed() || s.Count()+n > s.Max() {
		return s, false
	}
	return s.WithTotal(s.Total()+n, s.Count()+n), true
}

// setLimit moves total to limit, keeping held: count may go negative.
func (s Word) SetLimit(limit int64) (Word, bool) {
	if limit < 0 || limit > s.Max() || s.Closed() {
		return s, false
	}
	return s.WithTotal(limit, limit-s.Held()), true
}

// close sets the closed flag.
func (s Word) Close() (Word, bool) {
	return s | ClosedBit, !s.Closed()
}

// checkInvariants returns a description of the first invariant among I1–I3
// that s breaks, or "" if it holds them all.
func (s Word) CheckInvariants() string {
	count, total, max := s.Count(), s.Total(), s.Max()
	switch {
	case total < 0 || total > max || max > MaxPermits:
		return "I1: want 0 ≤ total ≤ max ≤ MaxPermits"
	case count > total:
		return "I2: want count ≤ total"
	case total-count > max:
		return "I3: want held ≤ max"
	}
	return ""
}
