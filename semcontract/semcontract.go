// Package semcontract holds what every semaphore in this module shares, so
// that a second implementation and the conformance suite need not import
// the first: the largest count, the errors a caller matches with errors.Is,
// the shape of a snapshot, and the check of a request.
//
// Users do not import it: atomicsem re-exports each name (atomicsem.ErrClosed
// is semcontract.ErrClosed, atomicsem.Stats is semcontract.Stats), and
// etcdsem's errors match these with errors.Is. An implementation of the
// contract (a semaphore on another store, say) imports it, returns these
// sentinels or errors that match them, and runs package semtest against
// itself.
package semcontract

import (
	"errors"
	"fmt"

	"github.com/atomicsem/atomicsem/internal/state"
)

// MaxPermits is the largest value for a semaphore's maximum, limit, or a
// single request: 2^30 − 1, the widest that atomicsem's packed state word
// holds. Every implementation keeps to it, so that code written against one
// runs against another. A budget of bytes up to a gigabyte can be counted
// in bytes; above that, count in KiB.
const MaxPermits = state.MaxPermits

// The sentinels keep the prefix "atomicsem: ", the name of the library
// and of the package that returns them to most callers.
var (
	// ErrClosed is returned by Acquire and SetLimit after Close.
	ErrClosed = errors.New("atomicsem: semaphore is closed")
	// ErrExceedsMax is returned (wrapped, with the numbers) when a request
	// or a limit is larger than the semaphore's maximum.
	ErrExceedsMax = errors.New("atomicsem: exceeds the semaphore's maximum")
	// ErrInvalidPermits is returned (wrapped, with the numbers) for a
	// negative request or one above MaxPermits, and by New for arguments
	// outside 0 ≤ initial ≤ max ≤ MaxPermits. (A limit above the maximum,
	// MaxPermits included, is ErrExceedsMax.)
	ErrInvalidPermits = errors.New("atomicsem: invalid number of permits")
)

// Stats is a snapshot of a semaphore's state. Available, Held, Limit and
// Closed are consistent with each other (read at one instant, or at one
// revision of a store); Waiters is the number of parked acquirers at about
// the same moment. The zero Stats describes a semaphore with nothing
// available, held or allowed, and no waiter.
type Stats struct {
	Available int64 // permits free now; negative while the limit is below Held
	Held      int64 // permits held by live tokens
	Limit     int64 // the live limit: Available + Held
	Max       int64 // the ceiling fixed when the semaphore was made
	Waiters   int   // parked acquirers
	Closed    bool
}

// CheckRequest validates a request for n permits from a semaphore whose
// maximum is max (itself at most MaxPermits). It returns nil if
// 0 ≤ n ≤ max. Otherwise it returns, wrapped with the numbers, invalid if
// n < 0 or n > MaxPermits, and exceeds if n is above max, since no release
// could ever satisfy it.
//
// invalid and exceeds are the caller's errors for the two refusals:
// ErrInvalidPermits and ErrExceedsMax, or an implementation's own errors
// that match them with errors.Is.
func CheckRequest(n, max int64, invalid, exceeds error) error {
	if n < 0 || n > MaxPermits {
		return fmt.Errorf("%w: %d is outside [0, %d]", invalid, n, MaxPermits)
	}
	if n > max {
		return fmt.Errorf("%w: requested %d, max %d", exceeds, n, max)
	}
	return nil
}

// CheckNew validates the arguments of a constructor that makes a semaphore
// with initial permits available and a ceiling of max. It returns nil if
// 0 ≤ initial ≤ max ≤ MaxPermits, and otherwise invalid (ErrInvalidPermits,
// or an implementation's own error that matches it) wrapped with the
// numbers.
func CheckNew(initial, max int64, invalid error) error {
	if initial < 0 || max > MaxPermits || initial > max {
		return fmt.Errorf("%w: New(%d, %d) needs 0 ≤ initial ≤ max ≤ %d", invalid, initial, max, MaxPermits)
	}
	return nil
}

// CheckLimit validates a new live limit for a semaphore whose maximum is
// max. It returns nil if 0 ≤ limit ≤ max, and otherwise, wrapped with the
// numbers, invalid for a negative limit and exceeds for one above max.
func CheckLimit(limit, max int64, invalid, exceeds error) error {
	switch {
	case limit < 0:
		return fmt.Errorf("%w: SetLimit(%d)", invalid, limit)
	case limit > max:
		return fmt.Errorf("%w: SetLimit(%d) with max %d", exceeds, limit, max)
	}
	return nil
}
