package keyed

import (
	"context"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/internal/errs"
	"github.com/atomicsem/atomicsem/token"
)

// Semaphores is a table of semaphores, one per key, each an
// atomicsem.Semaphore in FIFO mode with the table's shared limit unless
// its own limit was set with SetKeyLimit. Its methods are safe for
// concurrent use.
//
// A key's semaphore is made at its first Acquire, TryAcquire or
// SetKeyLimit, and dropped once nothing holds it, nobody waits on it, and
// its limit is the shared one: then it is indistinguishable from a new
// one. A key whose limit was set on its own, or lowered by a token's
// Forget, is kept until its limit is the shared one again.
//
// # Memory ordering
//
// As in atomicsem, per key: a token's Release synchronizes before the
// return of the Acquire or TryAcquire of the same key that obtains the
// released permits.
//
// A Semaphores must be made with NewSemaphores: the zero value is not
// usable, and its methods panic.
type Semaphores struct {
	limits[*atomicsem.Semaphore]
}

// NewSemaphores returns a table whose keys each get a semaphore of limit
// permits. WithMaxLimit sets how far SetLimit and SetKeyLimit may raise a
// limit later, limit itself by default; WithMaxKeys sets the cap on keys.
//
// NewSemaphores returns an error matching atomicsem.ErrInvalidPermits
// unless 0 ≤ limit ≤ max ≤ atomicsem.MaxPermits (a negative WithMaxLimit
// included), and ErrInvalidMaxKeys for a cap below 1. It panics if an
// option is nil.
func NewSemaphores(limit int64, opts ...Option) (*Semaphores, error) {
	o, err := makeOptions(opts)
	if err != nil {
		return nil, err
	}
	if !o.hasMaxLimit {
		o.maxLimit = limit
	}
	if limit < 0 || limit > o.maxLimit || o.maxLimit > atomicsem.MaxPermits {
		return nil, errs.Errorf(atomicsem.ErrInvalidPermits, "keyed: NewSemaphores(%d) with max %d needs 0 ≤ limit ≤ max ≤ %d",
			limit, o.maxLimit, atomicsem.MaxPermits)
	}
	s := &Semaphores{}
	s.invalid, s.exceeds = atomicsem.ErrInvalidPermits, atomicsem.ErrExceedsMax
	s.init(limit, o.maxLimit, o.maxKeys, s.newSemaphore, s.idle)
	return s, nil
}

// WithMaxLimit sets the largest limit that SetLimit and SetKeyLimit accept
// on a Semaphores or Gates table, and so the largest request: an Acquire
// of more fails at once with atomicsem.ErrExceedsMax. Without it the
// maximum is the limit given to NewSemaphores or NewGates. It has no
// effect on a Limiter.
func WithMaxLimit(max int64) Option {
	return func(o *options) { o.maxLimit, o.hasMaxLimit = max, true }
}

// valid panics if s is nil or the zero Semaphores, so that misuse fails
// with the package's name.
func (s *Semaphores) valid() {
	if s == nil {
		panic("keyed: method called on a nil *Semaphores")
	}
	if s.t.max == 0 {
		panic("keyed: method called on a zero Semaphores; make one with NewSemaphores")
	}
}

// checkRequest returns the error that atomicsem would return for a request
// of n permits, before any entry is made for it.
func (s *Semaphores) checkRequest(n int64) error {
	if n < 0 || n > atomicsem.MaxPermits {
		return errs.Errorf(atomicsem.ErrInvalidPermits, "keyed: requested %d", n)
	}
	if n > s.maxLimit {
		return errs.Errorf(atomicsem.ErrExceedsMax, "keyed: requested %d, max %d", n, s.maxLimit)
	}
	return nil
}

// newSemaphore makes a key's semaphore at the shared limit. It requires
// that the key's shard is locked, so that a SetLimit that stored a new
// limit either sees the entry or is seen by it.
func (s *Semaphores) newSemaphore() *atomicsem.Semaphore {
	return atomicsem.MustNew(s.limit.Load(), s.maxLimit)
}

// idle reports whether the entry at place i of sh is indistinguishable
// from a new one. It requires that sh is locked.
func (s *Semaphores) idle(sh *shard[*keyEntry[*atomicsem.Semaphore]], i int) bool {
	e := sh.ents[i].v
	if e.own || e.waiting.Load() != 0 {
		return false
	}
	st := e.lim.Stats()
	return st.Held == 0 && st.Waiters == 0 && st.Limit == s.limit.Load()
}

// TryAcquire takes n permits of key's semaphore without blocking and
// reports whether it did, following atomicsem.Semaphore.TryAcquire's rules
// for that semaphore. It also fails, changing nothing, if n is negative or
// above the maximum limit, and if key is new and the table is full (see
// the package documentation). On failure it returns the zero Token.
//
// On a key already present, TryAcquire allocates nothing.
func (s *Semaphores) TryAcquire(key string, n int64) (token.Token, bool) {
	s.valid()
	if s.checkRequest(n) != nil {
		return token.Token{}, false
	}
	sh, hi := s.t.locate(key)
	sh.mu.Lock()
	if i, _ := sh.find(key, hi); i >= 0 {
		defer sh.mu.Unlock()
		return sh.ents[i].v.lim.TryAcquire(n)
	}
	sh.mu.Unlock()
	return s.tryAcquireNew(sh, key, hi, n)
}

// tryAcquireNew is TryAcquire for a key that was absent, outlined so that
// the path for a key present stays small.
func (s *Semaphores) tryAcquireNew(sh *shard[*keyEntry[*atomicsem.Semaphore]], key string, hi uint32, n int64) (token.Token, bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, _, err := s.t.insert(sh, key, hi, s.newEntry)
	if err != nil {
		return token.Token{}, false
	}
	return sh.ents[i].v.lim.TryAcquire(n)
}

// Acquire blocks until n permits of key's semaphore are granted, then
// returns a token holding them; it follows atomicsem.Semaphore.Acquire's
// rules for that semaphore, FIFO among the callers of the same key.
//
// On failure Acquire returns the zero Token, takes nothing, and returns:
//   - atomicsem.ErrInvalidPermits (wrapped) if n < 0;
//   - atomicsem.ErrExceedsMax (wrapped) if n is above the maximum limit;
//   - ctx.Err() if ctx is done before the permits are granted;
//   - ErrTooManyKeys if key is new and the table is full.
//
// It is a run-time error to pass a nil ctx; the panic's message begins
// "keyed: ".
func (s *Semaphores) Acquire(ctx context.Context, key string, n int64) (token.Token, error) {
	s.valid()
	if ctx == nil {
		panic("keyed: Acquire with a nil Context")
	}
	if err := s.checkRequest(n); err != nil {
		return token.Token{}, err
	}
	if err := ctx.Err(); err != nil {
		return token.Token{}, err
	}
	e, err := s.enter(key)
	if err != nil {
		return token.Token{}, err
	}
	return s.wait(ctx, e, n)
}

// wait acquires n permits of e, which enter counted as waited on.
func (s *Semaphores) wait(ctx context.Context, e *keyEntry[*atomicsem.Semaphore], n int64) (token.Token, error) {
	defer e.waiting.Add(-1)
	return e.lim.Acquire(ctx, n)
}

// SetLimit sets the shared limit, the limit of every key but those whose
// own limit was set with SetKeyLimit, as atomicsem.Semaphore.SetLimit does
// for each: raising it wakes waiters that now fit, lowering it revokes no
// held token. It returns atomicsem.ErrInvalidPermits (wrapped) if limit < 0
// and atomicsem.ErrExceedsMax (wrapped) if it is above the maximum; in each
// case nothing changes.
//
// SetLimit visits every key, one shard at a time; calls on keys of other
// shards go on meanwhile.
func (s *Semaphores) SetLimit(limit int64) error {
	s.valid()
	return s.setLimit(limit)
}

// SetKeyLimit sets key's own limit, which SetLimit then leaves alone, as
// atomicsem.Semaphore.SetLimit does. It returns the errors SetLimit does,
// and ErrTooManyKeys if key is new and the table is full; in each case
// nothing changes. ResetKeyLimit makes the key follow the shared limit
// again.
func (s *Semaphores) SetKeyLimit(key string, limit int64) error {
	s.valid()
	return s.setKeyLimit(key, limit)
}

// ResetKeyLimit makes key follow the shared limit again, setting its limit
// to the shared one, after SetKeyLimit. It does nothing for a key without
// a limit of its own.
func (s *Semaphores) ResetKeyLimit(key string) {
	s.valid()
	s.resetKeyLimit(key)
}

// KeyStats returns a snapshot of key's semaphore, and reports false, with
// the shared limit in an otherwise new semaphore's Stats, if the table
// holds no entry for key: the two are indistinguishable.
func (s *Semaphores) KeyStats(key string) (atomicsem.Stats, bool) {
	s.valid()
	sh, hi := s.t.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i, _ := sh.find(key, hi); i >= 0 {
		return sh.ents[i].v.lim.Stats(), true
	}
	l := s.limit.Load()
	return atomicsem.Stats{Available: l, Limit: l, Max: s.maxLimit}, false
}

// Len returns the number of keys the table holds now.
func (s *Semaphores) Len() int {
	s.valid()
	return s.t.len()
}

// Sweep drops every key whose semaphore is indistinguishable from a new
// one, and returns how many it dropped. The table drops such keys on its
// own only when it is full; Sweep is for a caller that wants the memory
// back at once, such as after a burst of one-off keys.
func (s *Semaphores) Sweep() int {
	s.valid()
	return s.t.sweep()
}

// MustNewSemaphores is like NewSemaphores but panics if the arguments are
// invalid. It simplifies the initialisation of package-level tables:
//
//	var perTenant = keyed.MustNewSemaphores(4) // 4 requests in flight per tenant
func MustNewSemaphores(limit int64, opts ...Option) *Semaphores {
	s, err := NewSemaphores(limit, opts...)
	if err != nil {
		panic(err)
	}
	return s
}
