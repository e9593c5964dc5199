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
//	 63       62      61       60      59 ....... 40   39 ....... 20   19 ...... 0
//	+--------+-------+--------+------+--------------+---------------+-------------+
//	|starving|closed |eligible|queued|   max (20)   |  total (20)   |  held (20)  |
//	+--------+-------+--------+------+--------------+---------------+-------------+
//
//	held     permits held by live tokens
//	total    the live limit: permits in circulation, available plus held
//	max      the ceiling fixed by New; total never exceeds it
//	queued   set while the wait queue is non-empty
//	eligible set while a queued waiter asks for no more than total, so that
//	         a release could serve it; waiters that ask for more than the
//	         limit do not set it, and arrivals beside them stay lock-free
//	closed   set by Close, never cleared
//	starving barging mode only: a waiter has waited past the starvation
//	         bound, so arrivals queue and releases hand off
//
// The available count is total − held: negative while the limit is below
// what tokens hold ("debt"). Storing held rather than the count keeps every
// field unsigned, so the three fields take 60 bits and leave four for flags,
// and taking or returning permits is a plain add to the low field.
//
// Invariants (checked by CheckInvariants, the fuzz targets and the SPIN model):
//
//	I1  0 ≤ total ≤ max ≤ MaxPermits
//	I2  0 ≤ held ≤ max (held may exceed total: that is debt)
//	I3  eligible implies queued; starving implies eligible
//	I4  held equals the sum of the permits of live tokens
//	I5  closed, once set, stays set
//	I6  with the queue lock free, queued is set iff the queue is non-empty,
//	    and eligible iff a queued waiter asks for no more than total
//	I7  starving is never set in FIFO mode
//	I8  in FIFO mode, while eligible is set, only the holder of the queue
//	    lock changes the word: every lock-free writer refuses such a word
//
// A transition that would break I1–I3 is refused (ok == false) and changes
// nothing. Every transition rebuilds the word from decoded fields with the
// helpers below, so no flag bit can be dropped on the way.

// MaxPermits is the widest value a field of the word holds.
const MaxPermits = 1<<fieldBits - 1

const (
	fieldBits = 20

	totalShift = fieldBits
	maxShift   = 2 * fieldBits

	fieldMask = 1<<fieldBits - 1

	QueuedBit   Word = 1 << 60 // the wait queue is non-empty
	EligibleBit Word = 1 << 61 // a queued waiter fits under the limit
	ClosedBit   Word = 1 << 62 // Close was called
	StarvingBit Word = 1 << 63 // barging mode: hand off until the old waiter is served

	// QueueFlags are the flags that describe the wait queue.
	QueueFlags = QueuedBit | EligibleBit | StarvingBit
)

// Word is a packed semaphore state.
type Word uint64

// New packs the fields into a word, given the available count rather than
// held. It requires that they satisfy I1 and I2.
func New(count, total, max int64) Word {
	return Word(total-count) |
		Word(total)<<totalShift |
		Word(max)<<maxShift
}

func (s Word) Held() int64  { return int64(s) & fieldMask }
func (s Word) Total() int64 { return int64(s>>totalShift) & fieldMask }
func (s Word) Max() int64   { return int64(s>>maxShift) & fieldMask }
func (s Word) Count() int64 { return s.Total() - s.Held() }

func (s Word) Queued() bool   { return s&QueuedBit != 0 }
func (s Word) Eligible() bool { return s&EligibleBit != 0 }
func (s Word) Closed() bool   { return s&ClosedBit != 0 }
func (s Word) Starving() bool { return s&StarvingBit != 0 }

// WithHeld returns s with held replaced; every other bit is kept.
func (s Word) WithHeld(held int64) Word {
	if mutant.Active == mutant.DropClosed {
		s &^= ClosedBit // fault for scripts/mutants.sh; compiled out otherwise
	}
	return s&^fieldMask | Word(held)
}

// WithTotal returns s with total replaced; every other bit is kept.
func (s Word) WithTotal(total int64) Word {
	return s&^(fieldMask<<totalShift) | Word(total)<<totalShift
}

// WithFlag returns s with the flag bit set or cleared.
func (s Word) WithFlag(flag Word, on bool) Word {
	if on {
		return s | flag
	}
	return s &^ flag
}

// WithQueue returns s with the queue flags describing a queue: queued if it
// is non-empty, eligible if a waiter in it fits under the limit, starving
// only if asked and eligible (hand-off is for waiters a release can serve).
func (s Word) WithQueue(queued, eligible, starving bool) Word {
	eligible = eligible && queued
	return s.WithFlag(QueuedBit, queued).
		WithFlag(EligibleBit, eligible).
		WithFlag(StarvingBit, starving && eligible)
}

// The transitions. Each is a pure function of the old word and its argument:
// it returns the word to install and whether the operation may happen at
// all. Callers have already rejected arguments outside [0, MaxPermits].

// Acquire takes n permits if none of the flags in block is set and n are
// available.
func (s Word) Acquire(n int64, block Word) (Word, bool) {
	if s&block != 0 || s.Count() < n {
		return s, false
	}
	return s.WithHeld(s.Held() + n), true
}

// Release returns n held permits.
func (s Word) Release(n int64) (Word, bool) {
	if n > s.Held() {
		return s, false
	}
	return s.WithHeld(s.Held() - n), true
}

// Forget removes n held permits from circulation: held falls by n and
// total by n, but not below zero.
func (s Word) Forget(n int64) (Word, bool) {
	held := s.Held()
	if n > held {
		return s, false
	}
	if mutant.Active == mutant.Stale {
		return s.WithHeld(held - n), true // fault: the old total written back
	}
	return s.WithTotal(max(s.Total()-n, 0)).WithHeld(held - n), true
}

// TryRelease adds n new permits if the total stays within max.
func (s Word) TryRelease(n int64) (Word, bool) {
	if mutant.Active == mutant.TryReleaseIgnoresHeld {
		return s.tryReleaseIgnoringHeld(n)
	}
	if n <= 0 || s.Closed() || s.Total()+n > s.Max() {
		return s, false
	}
	return s.WithTotal(s.Total() + n), true
}

// tryReleaseIgnoringHeld is TryRelease with a fault for scripts/mutants.sh:
// its check counts only the available permits against max, forgetting the
// ones that tokens hold.
func (s Word) tryReleaseIgnoringHeld(n int64) (Word, bool) {
	if n <= 0 || s.Closed() || s.Count()+n > s.Max() {
		return s, false
	}
	total := min(s.Total()+n, MaxPermits) // the field cannot hold more
	return s.WithTotal(total), true
}

// SetLimit moves total to limit, keeping held: the count may go negative.
func (s Word) SetLimit(limit int64) (Word, bool) {
	if limit < 0 || limit > s.Max() || s.Closed() {
		return s, false
	}
	return s.WithTotal(limit), true
}

// Close sets the closed flag.
func (s Word) Close() (Word, bool) {
	return s | ClosedBit, !s.Closed()
}

// CheckInvariants returns a description of the first invariant among I1–I3
// that s breaks, or "" if it holds them all.
func (s Word) CheckInvariants() string {
	held, total, max := s.Held(), s.Total(), s.Max()
	switch {
	case total < 0 || total > max || max > MaxPermits:
		return "I1: want 0 ≤ total ≤ max ≤ MaxPermits"
	case held < 0 || held > max:
		return "I2: want 0 ≤ held ≤ max"
	case s.Eligible() && !s.Queued():
		return "I3: want eligible only with queued"
	case s.Starving() && !s.Eligible():
		return "I3: want starving only with eligible"
	}
	return ""
}
