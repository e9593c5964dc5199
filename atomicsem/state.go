package atomicsem

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
// Invariants (checked by checkInvariants, the fuzz targets and the SPIN model):
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

// MaxPermits is the largest value for a semaphore's maximum, limit, or a
// single request: 2^20 − 1.
const MaxPermits = 1<<limitBits - 1

const (
	countBits = 21
	limitBits = 20

	totalShift = countBits
	maxShift   = totalShift + limitBits

	countMask = 1<<countBits - 1
	limitMask = 1<<limitBits - 1

	waitersBit  state = 1 << 61 // the wait queue is non-empty
	closedBit   state = 1 << 62 // Close was called
	starvingBit state = 1 << 63 // barging mode: hand off until the old waiter is served
)

type state uint64

// newState packs the fields into a word. It requires that they satisfy I1–I3.
func newState(count, total, max int64) state {
	return state(uint64(count)&countMask) |
		state(total)<<totalShift |
		state(max)<<maxShift
}

func (s state) count() int64 { return int64(s<<(64-countBits)) >> (64 - countBits) }
func (s state) total() int64 { return int64(s>>totalShift) & limitMask }
func (s state) max() int64   { return int64(s>>maxShift) & limitMask }
func (s state) held() int64  { return s.total() - s.count() }

func (s state) waiters() bool  { return s&waitersBit != 0 }
func (s state) closed() bool   { return s&closedBit != 0 }
func (s state) starving() bool { return s&starvingBit != 0 }

// withCount returns s with count replaced; every other bit is kept.
func (s state) withCount(count int64) state {
	return s&^countMask | state(uint64(count)&countMask)
}

// withTotal returns s with total and count replaced; every other bit is kept.
func (s state) withTotal(total, count int64) state {
	return s&^(countMask|limitMask<<totalShift) |
		state(uint64(count)&countMask) |
		state(total)<<totalShift
}

// withFlag returns s with the flag bit set or cleared.
func (s state) withFlag(flag state, on bool) state {
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
func (s state) acquire(n int64, block state) (state, bool) {
	if s&block != 0 || s.count() < n {
		return s, false
	}
	return s.withCount(s.count() - n), true
}

// release returns n held permits.
func (s state) release(n int64) (state, bool) {
	if n > s.held() {
		return s, false
	}
	return s.withCount(s.count() + n), true
}

// forget removes n held permits from circulation: held falls by n, total
// falls by n but not below zero, and count = total − held throughout.
func (s state) forget(n int64) (state, bool) {
	held := s.held()
	if n > held {
		return s, false
	}
	total := max(s.total()-n, 0)
	return s.withTotal(total, total-(held-n)), true
}

// tryRelease adds n new permits if the total stays within max.
func (s state) tryRelease(n int64) (state, bool) {
	if n <= 0 || s.closed() || s.total()+n > s.max() {
		return s, false
	}
	return s.withTotal(s.total()+n, s.count()+n), true
}

// setLimit moves total to limit, keeping held: count may go negative.
func (s state) setLimit(limit int64) (state, bool) {
	if limit < 0 || limit > s.max() || s.closed() {
		return s, false
	}
	return s.withTotal(limit, limit-s.held()), true
}

// close sets the closed flag.
func (s state) close() (state, bool) {
	return s | closedBit, !s.closed()
}

// checkInvariants returns a description of the first invariant among I1–I3
// that s breaks, or "" if it holds them all.
func (s state) checkInvariants() string {
	count, total, max := s.count(), s.total(), s.max()
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
