package state

// BlockLimitMove is the lowest word at which a lock-free move of the limit
// must give way to the queue lock: every word at or above it has waiters
// queued (whose eligibility the limit decides), or is closed.
const BlockLimitMove = Word(Queued) << queueShift

// ForgetAvailable takes n available permits out of circulation: the limit
// falls by n and held stays, so the available count falls by n as well. It
// refuses, changing nothing, unless n are available and the word is below
// block (ClosedBit stops only a closed word; BlockFIFO and BlockBarging stop
// what a fast-path acquire must not pass). It requires 0 ≤ n ≤ MaxPermits.
func (s Word) ForgetAvailable(n int64, block Word) (Word, bool) {
	if s >= block || s.Available() < n {
		return s, false
	}
	return s.WithLimit(s.Limit() - n), true
}

// LessLimit returns s with the limit lowered by n; every other bit is
// kept. It requires 0 ≤ n ≤ s.Limit(), so that the subtraction cannot
// borrow from the fields above: a plain subtraction is cheaper than
// rebuilding the field, which keeps the fast path that calls it inlinable.
func (s Word) LessLimit(n int64) Word { return s - Word(n)<<limitShift }
