// Package state defines the semaphore's packed state word and its
// transitions as pure functions, so that the compare-and-swap loops in
// package atomicsem, the fuzz targets and the tests all share one definition.
package state

// The state word.
//
// All counting state of a Semaphore lives in one uint64, changed only by
// compare-and-swap: load, decode, decide, rebuild, CAS, retry on failure.
//
//	  63     62  61    60    59 ............ 30   29 ............. 0
//	+------+---------+------+------------------+-------------------+
//	|closed|queue (2)| idle |    limit (30)    |     held (30)     |
//	+------+---------+------+------------------+-------------------+
//
//	held    permits held by live tokens
//	limit   the live limit: permits in circulation, available plus held
//	idle    a WaitIdle caller waits for held to reach zero
//	queue   what the wait queue holds, one of four states:
//	          0  empty
//	          1  queued: waiters, every one asking for more than the limit
//	          2  eligible: a queued waiter fits under the limit, so that a
//	             release could serve it; waiters above the limit do not
//	             count, and arrivals beside them stay lock-free; in
//	             barging mode, also no woken waiter is on its way, so
//	             that a release must come to wake one
//	          3  starving: eligible, and in barging mode a waiter has
//	             waited past the starvation bound, so arrivals queue and
//	             releases hand off
//	closed  set by Close, never cleared
//
// The available count is limit − held: negative while the limit is below
// what tokens hold ("debt"). Storing held rather than the available count
// keeps every field unsigned, and taking or returning permits is a plain
// add to the low field.
//
// The semaphore's maximum is not in the word. It never changes after New,
// so a transition that reads it beside one load of the word is exactly as
// atomic as one that decodes it from the word; leaving it out gives held
// and limit 30 bits each (MaxPermits = 2^30 − 1, enough for a budget of a
// billion bytes). Transitions that check the maximum take it as an argument.
//
// The queue's three conditions (queued, eligible, starving) each imply the
// one before, so four states in two bits encode them, and with closed above
// them an arrival's whole test of the flags is one unsigned comparison: a
// word at or above BlockFIFO is closed, eligible or starving, and a word at
// or above BlockBarging is closed or starving.
//
// Invariants (checked by CheckInvariants, the fuzz targets and the SPIN
// model), for a semaphore whose maximum is max:
//
//	I1  0 ≤ limit ≤ max ≤ MaxPermits
//	I2  0 ≤ held ≤ max (held may exceed limit: that is debt)
//	I3  starving implies eligible implies queued (by the encoding)
//	I4  held equals the sum of the permits of live tokens
//	I5  closed, once set, stays set
//	I6  with the queue lock free, the queue state is queued or higher iff
//	    the queue is non-empty, eligible or higher iff a queued waiter asks
//	    for no more than limit (and, in barging mode unless starving, no
//	    woken waiter is on its way), and idle is set iff a WaitIdle caller
//	    waits
//	I7  starving is never set in FIFO mode
//	I8  in FIFO mode, while eligible is set, only the holder of the queue
//	    lock changes the word: every lock-free writer refuses such a word
//	I9  idle is never set while held is zero, once the lock is free: the
//	    change that brings held to zero under it wakes the idle waiters
//
// A transition that would break I1 or I2 is refused (ok == false) and
// changes nothing. Every transition rebuilds the word from decoded fields
// with the helpers below, so no flag bit can be dropped on the way.

// MaxPermits is the widest value a field of the word holds.
const MaxPermits = 1<<fieldBits - 1

const (
	fieldBits  = 30
	fieldMask  = 1<<fieldBits - 1
	limitShift = fieldBits
	idleShift  = 2 * fieldBits
	queueShift = idleShift + 1

	// IdleBit is set while a WaitIdle caller waits.
	IdleBit Word = 1 << idleShift
	// ClosedBit is set by Close.
	ClosedBit Word = 1 << 63

	queueMask Word = 3 << queueShift

	// BlockFIFO is the lowest word that stops a FIFO arrival's fast path:
	// every word at or above it is eligible, starving or closed.
	BlockFIFO = Word(Eligible) << queueShift
	// BlockBarging is the lowest word that stops a barging arrival's fast
	// path: every word at or above it is starving or closed.
	BlockBarging = Word(Starving) << queueShift
)

// Queue is the state of the wait queue as the word records it.
type Queue uint8

// The queue states, each implying the one before.
const (
	Empty    Queue = iota // nobody is queued
	Queued                // waiters are queued, none fits under the limit
	Eligible              // a queued waiter fits under the limit
	Starving              // eligible, and barging mode hands off
)

// Word is a packed semaphore state.
type Word uint64

// New packs the fields into a word. It requires 0 ≤ held, limit ≤
// MaxPermits.
func New(held, limit int64) Word {
	return Word(held) | Word(limit)<<limitShift
}

// Held returns the permits held by live tokens.
func (s Word) Held() int64 { return int64(s) & fieldMask }

// Limit returns the live limit.
func (s Word) Limit() int64 { return int64(s>>limitShift) & fieldMask }

// Available returns limit − held, negative in debt.
func (s Word) Available() int64 { return s.Limit() - s.Held() }

// Queue returns the queue state.
func (s Word) Queue() Queue { return Queue(s & queueMask >> queueShift) }

// Queued reports whether the wait queue is non-empty.
func (s Word) Queued() bool { return s&queueMask != 0 }

// Eligible reports whether a queued waiter fits under the limit: the
// higher bit of the queue state, set in Eligible and Starving.
func (s Word) Eligible() bool { return s&BlockFIFO != 0 }

// Starving reports whether barging mode hands off.
func (s Word) Starving() bool { return s&queueMask == queueMask }

// Idle reports whether a WaitIdle caller waits.
func (s Word) Idle() bool { return s&IdleBit != 0 }

// ReleaseBlocked reports whether a release must go to the queue lock
// rather than return its permits with one CAS: the queue is eligible (a
// waiter a release could serve), or a WaitIdle caller waits (so that the
// release that leaves no permit held can wake it).
func (s Word) ReleaseBlocked() bool { return s&(BlockFIFO|IdleBit) != 0 }

// Closed reports whether Close was called.
func (s Word) Closed() bool { return s&ClosedBit != 0 }

// WithHeld returns s with held replaced; every other bit is kept. It
// requires 0 ≤ held ≤ MaxPermits.
func (s Word) WithHeld(held int64) Word {
	return s&^fieldMask | Word(held)
}

// WithLimit returns s with limit replaced; every other bit is kept. It
// requires 0 ≤ limit ≤ MaxPermits.
func (s Word) WithLimit(limit int64) Word {
	return s&^(fieldMask<<limitShift) | Word(limit)<<limitShift
}

// WithQueue returns s with the queue state replaced.
func (s Word) WithQueue(q Queue) Word {
	return s&^queueMask | Word(q&3)<<queueShift
}

// WithIdle returns s with the idle flag set or cleared.
func (s Word) WithIdle(on bool) Word {
	if on {
		return s | IdleBit
	}
	return s &^ IdleBit
}

// QueueOf returns the queue state that describes a queue: Empty unless it
// is queued, Queued unless a waiter in it fits under the limit (eligible),
// Starving only if asked and eligible (hand-off is for waiters a release
// can serve).
func QueueOf(queued, eligible, starving bool) Queue {
	switch {
	case !queued:
		return Empty
	case !eligible:
		return Queued
	case starving:
		return Starving
	}
	return Eligible
}

// The transitions. Each is a pure function of the old word and its
// arguments: it returns the word to install and whether the operation may
// happen at all. Callers have already rejected counts outside
// [0, MaxPermits]; those that check the maximum take it as max.

// Acquire takes n permits if the word is below block and n are available.
// A block of ClosedBit stops only a closed word; BlockFIFO and BlockBarging
// stop what the fast paths must not pass.
func (s Word) Acquire(n int64, block Word) (Word, bool) {
	if s >= block || s.Available() < n {
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
// limit by n, but not below zero. It takes the maximum only to share the
// other limit moves' signature, and ignores it.
func (s Word) Forget(n, _ int64) (Word, bool) {
	held := s.Held()
	if n > held {
		return s, false
	}
	return s.WithLimit(max(s.Limit()-n, 0)).WithHeld(held - n), true
}

// TryRelease adds n new permits if the limit stays within max.
func (s Word) TryRelease(n, max int64) (Word, bool) {
	if n <= 0 || s.Closed() || n > max-s.Limit() {
		return s, false
	}
	return s.WithLimit(s.Limit() + n), true
}

// Refill adds up to n new permits, as many as max allows, and refuses if
// it can add none.
func (s Word) Refill(n, max int64) (Word, bool) {
	room := max - s.Limit()
	if n <= 0 || s.Closed() || room <= 0 {
		return s, false
	}
	return s.WithLimit(s.Limit() + min(n, room)), true
}

// SetLimit moves the limit to limit, keeping held: the available count may
// go negative.
func (s Word) SetLimit(limit, max int64) (Word, bool) {
	if limit < 0 || limit > max || s.Closed() {
		return s, false
	}
	return s.WithLimit(limit), true
}

// Close sets the closed flag.
func (s Word) Close() (Word, bool) {
	return s | ClosedBit, !s.Closed()
}

// CheckInvariants returns a description of the first of I1 and I2 that s
// breaks for a semaphore of maximum max, or "" if it holds both. (I3 holds
// by the encoding.)
func (s Word) CheckInvariants(max int64) string {
	held, limit := s.Held(), s.Limit()
	switch {
	case limit < 0 || limit > max || max > MaxPermits:
		return "I1: want 0 ≤ limit ≤ max ≤ MaxPermits"
	case held < 0 || held > max:
		return "I2: want 0 ≤ held ≤ max"
	}
	return ""
}
