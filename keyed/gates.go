package keyed

import (
	"context"
	"fmt"

	"github.com/atomicsem/atomicsem/internal/errs"
	"github.com/atomicsem/atomicsem/overload"
	"github.com/atomicsem/atomicsem/token"
)

// Gates is a table of priority gates, one per key, each an overload.Gate
// with the table's classes and queue discipline (WithGateOptions) and the
// table's shared limit unless its own limit was set with SetKeyLimit: every
// key's requests are admitted by class, with each class's guaranteed share
// and ceiling of that key's limit, and wait under that key's queue
// discipline. Its methods are safe for concurrent use.
//
// A key's gate is made at its first Acquire, TryAcquire or SetKeyLimit, and
// dropped once it is indistinguishable from a new one (overload.Gate.Idle:
// nothing held, nobody waiting, no overload mode and no estimate of the
// wait that time has not yet ended) at the shared limit. A key whose limit
// was set on its own, or lowered by a token's Forget, is kept until its
// limit is the shared one again.
//
// Each key's gate answers as an overload.Gate of the same configuration
// answers, with the same errors: a shed (overload.ErrShed), ctx.Err(), and
// for a request no limit could admit overload.ErrInvalidPermits or
// overload.ErrExceedsMax, wrapped in the package's words. The gates are
// never closed.
//
// A gate costs many times the memory of a semaphore (see the package
// documentation's Memory section): where most keys need no priorities,
// a Semaphores table in front of one overload.Gate for the whole service
// costs less.
//
// # Memory ordering
//
// As in overload, per key: the end of a token synchronizes before the
// return of the Acquire or TryAcquire of the same key that obtains the
// permits it returned.
//
// A Gates must be made with NewGates: the zero value is not usable, and its
// methods panic.
type Gates struct {
	limits[*overload.Gate]
	classes  []overload.Class
	gateOpts []overload.Option
	// probe is a gate of the table's configuration at the maximum limit,
	// never acquired: it names the classes and gives their ceilings at the
	// maximum, so that a request no gate could admit is refused before a
	// key is made for it.
	probe   *overload.Gate
	ceiling [overload.MaxClasses]int64
}

// WithGateOptions gives the options of every gate of a Gates table (the
// queue discipline: overload.WithMaxQueue, WithMaxWait, WithCoDel,
// WithStarvationBound). It has no effect on a Limiter or a Semaphores
// table. It is a run-time error to pass a nil option; the panic's message
// begins "keyed: ".
func WithGateOptions(opts ...overload.Option) Option {
	for _, opt := range opts {
		if opt == nil {
			panic("keyed: WithGateOptions with a nil overload.Option")
		}
	}
	opts = append([]overload.Option(nil), opts...)
	return func(o *options) { o.gateOpts = append(o.gateOpts, opts...) }
}

// NewGates returns a table whose keys each get a gate of limit permits
// shared by classes, highest priority first, as overload.New makes one.
// WithMaxLimit sets how far SetLimit and SetKeyLimit may raise a limit
// later, limit itself by default; WithGateOptions sets the gates' queue
// discipline; WithMaxKeys sets the cap on keys.
//
// NewGates returns the errors overload.New returns for the same classes,
// limits and options, in the package's words: overload.ErrInvalidClasses,
// overload.ErrInvalidPermits unless 0 ≤ limit ≤ max ≤
// overload.MaxPermits(len(classes)), overload.ErrInvalidOption; and
// ErrInvalidMaxKeys for a cap below 1. It panics if an option is nil.
func NewGates(limit int64, classes []overload.Class, opts ...Option) (*Gates, error) {
	o, err := makeOptions(opts)
	if err != nil {
		return nil, err
	}
	if !o.hasMaxLimit {
		o.maxLimit = limit
	}
	// overload.New checks the number of classes before the limits, and
	// names the limits in its own words; the probe's New checks the rest.
	if k := len(classes); k >= 1 && k <= overload.MaxClasses {
		if mp := overload.MaxPermits(k); limit < 0 || limit > o.maxLimit || o.maxLimit > mp {
			return nil, errs.Errorf(overload.ErrInvalidPermits, "keyed: NewGates(%d) with max %d and %d classes needs 0 ≤ limit ≤ max ≤ %d",
				limit, o.maxLimit, k, mp)
		}
	}
	probe, err := overload.New(o.maxLimit, o.maxLimit, classes, o.gateOpts...)
	if err != nil {
		return nil, errs.Reprefix("keyed", err)
	}
	s := &Gates{
		classes:  append([]overload.Class(nil), classes...),
		gateOpts: o.gateOpts,
		probe:    probe,
	}
	for c, cs := range probe.Stats().Classes {
		s.ceiling[c] = cs.Ceiling
	}
	s.invalid, s.exceeds = overload.ErrInvalidPermits, overload.ErrExceedsMax
	s.init(limit, o.maxLimit, o.maxKeys, s.newGate, s.idle)
	return s, nil
}

// MustNewGates is like NewGates but panics if the arguments are invalid.
// It simplifies the initialisation of package-level tables.
func MustNewGates(limit int64, classes []overload.Class, opts ...Option) *Gates {
	s, err := NewGates(limit, classes, opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// valid panics if s is nil or the zero Gates, so that misuse fails with the
// package's name.
func (s *Gates) valid() {
	if s == nil {
		panic("keyed: method called on a nil *Gates")
	}
	if s.t.max == 0 {
		panic("keyed: method called on a zero Gates; make one with NewGates")
	}
}

// checkClass panics if c is not a class of the table.
func (s *Gates) checkClass(method string, c int) {
	if k := len(s.classes); c < 0 || c >= k {
		panic(fmt.Sprintf("keyed: %s called with class %d, outside [0, %d)", method, c, k))
	}
}

// checkRequest returns the error that a gate would return for a request of
// n permits of class c, before any entry is made for it.
func (s *Gates) checkRequest(c int, n int64) error {
	if mp := overload.MaxPermits(len(s.classes)); n < 0 || n > mp {
		return errs.Errorf(overload.ErrInvalidPermits, "keyed: requested %d, outside [0, %d]", n, mp)
	}
	if n > s.ceiling[c] {
		return errs.Errorf(overload.ErrExceedsMax, "keyed: requested %d of class %q, whose ceiling at the maximum limit %d is %d",
			n, s.classes[c].Name, s.maxLimit, s.ceiling[c])
	}
	return nil
}

// newGate makes a gate at the shared limit. For a key's entry it requires
// that the key's shard is locked, so that a SetLimit that stored a new
// limit either sees the entry or is seen by it.
func (s *Gates) newGate() *overload.Gate {
	return overload.MustNew(s.limit.Load(), s.maxLimit, s.classes, s.gateOpts...) // checked by NewGates
}

// idle reports whether the entry at place i of sh is indistinguishable
// from a new one. It requires that sh is locked: every call that could
// change the gate then either holds that lock or is counted in waiting, and
// with nothing held no token is out to come back.
func (s *Gates) idle(sh *shard[*keyEntry[*overload.Gate]], i int) bool {
	e := sh.ents[i].v
	if e.own || e.waiting.Load() != 0 {
		return false
	}
	return e.lim.Limit() == s.limit.Load() && e.lim.Idle()
}

// Classes returns the number of classes of the table's gates.
func (s *Gates) Classes() int {
	s.valid()
	return len(s.classes)
}

// Class returns the index of the class named name, compared without regard
// to case, and reports whether there is one.
func (s *Gates) Class(name string) (int, bool) {
	s.valid()
	return s.probe.Class(name)
}

// TryAcquire takes n permits of class c of key's gate without waiting and
// reports whether it did, following overload.Gate.TryAcquire's rules for
// that gate. It also fails, changing nothing, if n is negative or above
// what class c could ever hold, and if key is new and the table is full
// (see the package documentation). On failure it returns the zero Token.
//
// It is a run-time error to pass a class outside [0, Classes()); the
// panic's message begins "keyed: ".
func (s *Gates) TryAcquire(key string, c int, n int64) (token.Token, bool) {
	s.valid()
	s.checkClass("TryAcquire", c)
	if s.checkRequest(c, n) != nil {
		return token.Token{}, false
	}
	sh, hi := s.t.locate(key)
	sh.mu.Lock()
	if i, _ := sh.find(key, hi); i >= 0 {
		defer sh.mu.Unlock()
		return sh.ents[i].v.lim.TryAcquire(c, n)
	}
	sh.mu.Unlock()
	return s.tryAcquireNew(sh, key, hi, c, n)
}

// tryAcquireNew is TryAcquire for a key that was absent, outlined so that
// the path for a key present stays small.
func (s *Gates) tryAcquireNew(sh *shard[*keyEntry[*overload.Gate]], key string, hi uint32, c int, n int64) (token.Token, bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, _, err := s.t.insert(sh, key, hi, s.newEntry)
	if err != nil {
		return token.Token{}, false
	}
	return sh.ents[i].v.lim.TryAcquire(c, n)
}

// Acquire blocks until n permits of class c of key's gate are granted,
// then returns a token holding them; it follows overload.Gate.Acquire's
// rules for that gate: priority service order, guaranteed shares and the
// queue discipline, among the callers of the same key.
//
// On failure Acquire returns the zero Token, takes nothing, and returns:
//   - overload.ErrInvalidPermits (wrapped) if n < 0 or n is above
//     overload.MaxPermits(Classes());
//   - overload.ErrExceedsMax (wrapped) if class c could never hold n
//     permits, at the maximum limit;
//   - ctx.Err() if ctx is done before the permits are granted;
//   - a shed of the key's gate (matching overload.ErrShed);
//   - ErrTooManyKeys if key is new and the table is full.
//
// It is a run-time error to pass a nil ctx or a class outside
// [0, Classes()); the panic's message begins "keyed: ".
func (s *Gates) Acquire(ctx context.Context, key string, c int, n int64) (token.Token, error) {
	s.valid()
	if ctx == nil {
		panic("keyed: Acquire with a nil Context")
	}
	s.checkClass("Acquire", c)
	if err := s.checkRequest(c, n); err != nil {
		return token.Token{}, err
	}
	if err := ctx.Err(); err != nil {
		return token.Token{}, err
	}
	e, err := s.enter(key)
	if err != nil {
		return token.Token{}, err
	}
	defer e.waiting.Add(-1)
	return e.lim.Acquire(ctx, c, n)
}

// SetLimit sets the shared limit, the limit of every key but those whose
// own limit was set with SetKeyLimit, as overload.Gate.SetLimit does for
// each: raising it serves the waiters it admits, lowering it revokes no
// held token. It returns overload.ErrInvalidPermits (wrapped) if limit < 0
// and overload.ErrExceedsMax (wrapped) if it is above the maximum; in each
// case nothing changes.
//
// SetLimit visits every key, one shard at a time; calls on keys of other
// shards go on meanwhile.
func (s *Gates) SetLimit(limit int64) error {
	s.valid()
	return s.setLimit(limit)
}

// SetKeyLimit sets key's own limit, which SetLimit then leaves alone, as
// overload.Gate.SetLimit does. It returns the errors SetLimit does, and
// ErrTooManyKeys if key is new and the table is full; in each case nothing
// changes. ResetKeyLimit makes the key follow the shared limit again.
func (s *Gates) SetKeyLimit(key string, limit int64) error {
	s.valid()
	return s.setKeyLimit(key, limit)
}

// ResetKeyLimit makes key follow the shared limit again, setting its limit
// to the shared one, after SetKeyLimit. It does nothing for a key without
// a limit of its own.
func (s *Gates) ResetKeyLimit(key string) {
	s.valid()
	s.resetKeyLimit(key)
}

// KeyStats returns a snapshot of key's gate, and reports false, with a new
// gate's Stats at the shared limit, if the table holds no entry for key:
// the two are indistinguishable.
func (s *Gates) KeyStats(key string) (overload.Stats, bool) {
	s.valid()
	sh, hi := s.t.locate(key)
	sh.mu.Lock()
	if i, _ := sh.find(key, hi); i >= 0 {
		defer sh.mu.Unlock()
		return sh.ents[i].v.lim.Stats(), true
	}
	sh.mu.Unlock()
	return s.newGate().Stats(), false
}

// Len returns the number of keys the table holds now.
func (s *Gates) Len() int {
	s.valid()
	return s.t.len()
}

// Sweep drops every key whose gate is indistinguishable from a new one,
// and returns how many it dropped. The table drops such keys on its own
// only when it is full; Sweep is for a caller that wants the memory back
// at once, such as after a burst of one-off keys.
func (s *Gates) Sweep() int {
	s.valid()
	return s.t.sweep()
}
