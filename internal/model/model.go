// Package model is a sequential reference model of atomicsem.Semaphore.
//
// It restates the semaphore's contract as plain arithmetic on four fields,
// with no bit packing, no atomics and no waiting, so that a reviewer can check
// it against the documentation line by line. The fuzz targets run the real
// semaphore and the transitions of internal/state beside it, and the
// linearizability checker uses it as the sequential specification that
// concurrent histories must match.
//
// The model has no wait queue: an Acquire that cannot be granted at once
// reports WouldBlock instead of waiting. Held permits are not tracked per
// token; Held is Limit − Available, and the caller passes each token's count to
// Release and Forget.
package model

// MaxPermits is the largest maximum, limit or request a semaphore accepts. It
// is written out here rather than imported so that a change to the packed
// word's field widths shows up as a disagreement in the tests.
const MaxPermits = 1<<30 - 1

// Outcome is the result of a model operation that can fail. The zero value
// is OK.
type Outcome uint8

const (
	OK             Outcome = iota // the operation happened
	InvalidPermits                // atomicsem.ErrInvalidPermits
	ExceedsMax                    // atomicsem.ErrExceedsMax
	CtxDone                       // the context's error, returned unwrapped
	Closed                        // atomicsem.ErrClosed
	WouldBlock                    // Acquire with a live context would wait
)

var outcomeNames = [...]string{
	OK:             "ok",
	InvalidPermits: "invalid permits",
	ExceedsMax:     "exceeds max",
	CtxDone:        "ctx done",
	Closed:         "closed",
	WouldBlock:     "would block",
}

// String returns a short name for the outcome.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "Outcome(?)"
}

// Semaphore is the model's whole state. The zero value is a semaphore with
// no permits and a maximum of zero. It is a plain value: copying it copies
// the state, which is what the linearizability checker needs.
type Semaphore struct {
	Available int64 // available now; negative while Limit is below Held
	Limit     int64 // the live limit: available plus held
	Max       int64 // the ceiling fixed by New
	Closed    bool  // set by Close, never cleared
}

// Stats mirrors atomicsem.Stats without the number of parked waiters, which
// the model, having no queue, does not have.
type Stats struct {
	Available int64
	Held      int64
	Limit     int64
	Max       int64
	Closed    bool
}

// New models atomicsem.New: it needs 0 ≤ initial ≤ max ≤ MaxPermits and
// starts with initial permits available and a limit of initial.
func New(initial, max int64) (Semaphore, Outcome) {
	if initial < 0 || initial > max || max > MaxPermits {
		return Semaphore{}, InvalidPermits
	}
	return Semaphore{Available: initial, Limit: initial, Max: max}, OK
}

// Held returns the permits held by live tokens.
func (s *Semaphore) Held() int64 {
	return s.Limit - s.Available
}

// CheckRequest returns the error Acquire gives for a request of n permits
// before it looks at the context or the state: InvalidPermits outside
// [0, MaxPermits], ExceedsMax above Max, OK otherwise.
func (s *Semaphore) CheckRequest(n int64) Outcome {
	if n < 0 || n > MaxPermits {
		return InvalidPermits
	}
	if n > s.Max {
		return ExceedsMax
	}
	return OK
}

// Acquire models Acquire(ctx, n) with a context that is done at the call
// (ctxDone) or live. The checks come in the order the contract lists them:
// the request, then the context (a done context fails even when permits are
// free, and even after Close), then Close. A request for zero permits is
// granted at once. Otherwise the permits are taken if Available covers them, and
// WouldBlock is returned, with nothing changed, if it does not.
func (s *Semaphore) Acquire(n int64, ctxDone bool) Outcome {
	if o := s.CheckRequest(n); o != OK {
		return o
	}
	if ctxDone {
		return CtxDone
	}
	if s.Closed {
		return Closed
	}
	if n == 0 {
		return OK
	}
	if s.Available < n {
		return WouldBlock
	}
	s.Available -= n
	return OK
}

// TryAcquire models TryAcquire(n): it takes n permits and reports true if n
// is within [0, Max], the semaphore is open and Available covers n. Zero permits
// succeed unless the semaphore is closed.
func (s *Semaphore) TryAcquire(n int64) bool {
	if n < 0 || n > s.Max || s.Closed {
		return false
	}
	if n == 0 {
		return true
	}
	if s.Available < n {
		return false
	}
	s.Available -= n
	return true
}

// Release models Token.Release for a token of n permits: they become
// available again, also after Close. It reports false, changing nothing, if
// n is negative or more than is held, which no real token can cause.
func (s *Semaphore) Release(n int64) bool {
	if n < 0 || n > s.Held() {
		return false
	}
	s.Available += n
	return true
}

// Forget models Token.Forget for a token of n permits: Held falls by n, the
// limit falls by n but not below zero, and Available stays Limit − Held. It
// reports false, changing nothing, if n is negative or more than is held.
func (s *Semaphore) Forget(n int64) bool {
	if n < 0 || n > s.Held() {
		return false
	}
	held := s.Held() - n
	s.Limit = max(s.Limit-n, 0)
	s.Available = s.Limit - held
	return true
}

// TryRelease models TryRelease(n): it adds n new permits to both Available and
// Limit and reports true, if n > 0, the semaphore is open and Limit + n stays
// within Max (so permits held by tokens count against Max).
func (s *Semaphore) TryRelease(n int64) bool {
	// n > Max − Limit rather than Limit + n > Max: n may be any int64.
	if n <= 0 || s.Closed || n > s.Max-s.Limit {
		return false
	}
	s.Limit += n
	s.Available += n
	return true
}

// Refill models Refill(n): it adds min(n, Max − Limit) new permits to both
// Available and Limit and returns how many, or 0, changing nothing, if
// n ≤ 0 or the semaphore is closed.
func (s *Semaphore) Refill(n int64) int64 {
	if n <= 0 || s.Closed {
		return 0
	}
	added := min(n, s.Max-s.Limit)
	s.Limit += added
	s.Available += added
	return added
}

// SetLimit models SetLimit(limit): the limit becomes limit and Available becomes
// limit − Held, negative if tokens hold more than the new limit. It fails,
// changing nothing, with InvalidPermits for a negative limit, ExceedsMax
// above Max, and Closed after Close, checked in that order.
func (s *Semaphore) SetLimit(limit int64) Outcome {
	switch {
	case limit < 0:
		return InvalidPermits
	case limit > s.Max:
		return ExceedsMax
	case s.Closed:
		return Closed
	}
	held := s.Held()
	s.Limit = limit
	s.Available = limit - held
	return OK
}

// WaitIdle models WaitIdle(ctx) with a context that is done at the call
// (ctxDone) or live: OK at once if no permit is held (whatever the
// context), else the context's error if it is done, else WouldBlock. It
// changes nothing.
func (s *Semaphore) WaitIdle(ctxDone bool) Outcome {
	switch {
	case s.Held() == 0:
		return OK
	case ctxDone:
		return CtxDone
	}
	return WouldBlock
}

// Close models Close: the semaphore is closed for good; closing it again
// changes nothing.
func (s *Semaphore) Close() {
	s.Closed = true
}

// Stats returns the model's counterpart of atomicsem.Stats.
func (s *Semaphore) Stats() Stats {
	return Stats{
		Available: s.Available,
		Held:      s.Held(),
		Limit:     s.Limit,
		Max:       s.Max,
		Closed:    s.Closed,
	}
}
