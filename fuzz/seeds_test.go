package fuzz_test

// Hand-written seeds, decoded as decoder describes. The committed corpus in
// testdata/fuzz holds more, found by the fuzzer.

// transitionSeeds start with a word (max, limit, held selectors, then the
// flags: bits 0 and 1 the queue state, 2 idle, 3 closed) followed by
// operations (0 Acquire, 1 Release, 2 Forget, 3 TryRelease, 4 Refill,
// 5 SetLimit, 6 Close; Acquire's block selector 0 is closed alone, 1 the
// FIFO block, 2 the barging one).
var transitionSeeds = [][]byte{
	// max 5, limit 3, held 2: Acquire(2) refused, Acquire(1) taken,
	// Release(held), Forget(held+1) refused.
	{20, 12, 8, 0, 0, 1, 3, 1, 0, 1, 2, 1, 1, 5, 2, 2, 5, 3},
	// in debt (limit 1, held 3): Forget(held) leaves the limit at zero.
	{20, 4, 12, 0, 2, 5, 2},
	// everything at MaxPermits, starving and idle: SetLimit(0) gives the
	// deepest debt, Release(held) pays it, TryRelease(1) is refused.
	{1, 1, 1, 7, 5, 0, 0, 1, 5, 2, 3, 0, 8},
	// TryRelease up to max exactly, then one more.
	{20, 12, 12, 0, 3, 9, 2, 3, 0, 8},
	// Refill one past the room left fills up to max, then adds nothing.
	{20, 12, 8, 0, 4, 9, 3, 4, 9, 2},
	// Close twice with the queue eligible.
	{20, 12, 0, 2, 6, 6},
	// eligible: refused with the FIFO block, taken with the barging one.
	{20, 12, 0, 2, 0, 0, 8, 1, 0, 0, 8, 2},
	// queued alone (only waiters above the limit): taken with the FIFO block.
	{20, 12, 0, 1, 0, 0, 8, 1},
	// SetLimit(-1) and SetLimit(max+1) are refused.
	{20, 12, 8, 0, 5, 0, 6, 5, 7, 3},
	// closed and idle: Release(held) and Forget(1) keep both flags,
	// Acquire is refused by every block.
	{20, 12, 8, 12, 1, 5, 2, 2, 0, 8, 0, 0, 8, 0},
}

// semaphoreSeeds start with the mode (odd: barging) and New's two
// arguments, followed by operations (see opsRun.step); a small count v is
// the selector 8v.
var semaphoreSeeds = [][]byte{
	// New(3, 5): Acquire(2), TryAcquire(2) refused, Release, TryAcquire(3),
	// Forget.
	{0, 24, 40, 1, 0, 16, 2, 0, 16, 3, 0, 2, 0, 24, 4, 0},
	// barging New(4, 4): Acquire(3), SetLimit(1) into debt, zero-permit
	// TryAcquire and Acquire still succeed, TryAcquire(1) does not,
	// Release pays the debt.
	{1, 32, 32, 1, 0, 24, 7, 0, 8, 2, 0, 0, 1, 0, 0, 2, 0, 8, 3, 0, 2, 0, 8},
	// invalid New: (-1, 1), (5, 3), (0, MaxPermits+1).
	{0, 6, 8},
	{0, 40, 24},
	{0, 0, 5},
	// New(MaxPermits, MaxPermits): take everything, TryAcquire(1) and
	// TryRelease(1) refused, Forget it all, TryRelease(MaxPermits).
	{0, 4, 4, 1, 7, 2, 2, 0, 8, 6, 0, 8, 4, 0, 6, 0, 4},
	// Close with a token out: acquires, TryRelease and SetLimit fail, the
	// token still releases once, ending it again or the zero Token panics,
	// a done context still wins.
	{0, 16, 24, 1, 0, 8, 8, 1, 0, 8, 2, 0, 0, 6, 0, 8, 7, 0, 8, 3, 0, 5, 1, 5, 0, 0, 0, 8, 0, 0, 0, 8, 1},
	// invalid arguments on New(2, 3).
	{0, 16, 24, 1, 0, 6, 1, 0, 32, 1, 0, 5, 2, 0, 6, 7, 0, 6, 7, 0, 32, 6, 0, 6, 6, 0, 0},
	// barging New(3, 5): Acquire(3), SetLimit(1), Forget in debt leaves
	// the limit at zero, TryRelease(5).
	{1, 24, 40, 1, 0, 24, 7, 0, 8, 4, 0, 6, 0, 40},
	// With a permit cache (0x40), New(MaxPermits, MaxPermits): Acquire(1)
	// and TryAcquire(1) draw a block into the stripe, SetLimit(held)
	// leaves nothing free, TryAcquire(1) refused, both released,
	// TryAcquire(available), released, WaitIdle, Close.
	{0x40, 4, 4, 1, 0, 8, 2, 0, 8, 7, 5, 2, 2, 0, 8, 3, 0, 3, 0, 2, 1, 2, 3, 0, 11, 1, 8},
}

// autoResetSeeds are operation sequences: 0 Set, 1 Reset, 2 TryWait,
// 3 Wait with a done context (then its selector), 4 Wait with a live
// context, 5 receive from C.
var autoResetSeeds = [][]byte{
	{0, 0, 2, 2},          // two Sets release one TryWait
	{0, 1, 2, 4},          // Reset discards the signal
	{0, 3, 0, 3, 1, 4, 2}, // a done Wait consumes nothing, even when set
	{0, 5, 5, 0, 4, 4},    // C consumes like Wait
	{2, 4, 5, 1, 1, 0, 0}, // operations on a fresh event
}
