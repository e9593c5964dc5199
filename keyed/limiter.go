package keyed

import (
	"context"
	"time"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credit"
	"github.com/atomicsem/atomicsem/internal/errs"
	"github.com/atomicsem/atomicsem/token"
)

// Limiter is a table of credit buckets, one per key, all of one rate and
// burst: each key's credit accrues at the rate up to the burst, with the
// laws of credit.Bucket. Its methods are safe for concurrent use.
//
// A key holds one credit.State, a few words, beside the key in its
// shard's table: the configuration (a credit.Config) is shared, and no
// timer or goroutine runs per key. A key's bucket is made full at the key's first use and dropped
// once it is full again with nobody waiting on it and nothing reserved
// from it: then it is indistinguishable from a new one.
//
// TrySpend takes credit for good if the key's balance covers it now; Spend
// waits for it, FIFO among the spends and acquires of the same key, and
// while any of them waits TrySpend does not take the key's credit ahead of
// them. TryAcquire and Acquire reserve credit as a token.Token that can be
// given back. Take is TrySpend with what an HTTP server tells its client.
// Most callers want TrySpend (or Middleware).
//
// # Memory ordering
//
// As in credit, per key: credit given back by a token's Release
// synchronizes before the return of the spend or acquire of the same key
// that takes it.
//
// A Limiter must be made with NewLimiter: the zero value is not usable,
// and its methods panic.
type Limiter struct {
	t   table[limEntry]
	cfg *credit.Config
}

// NewLimiter returns a table whose keys each get a bucket of burst credits
// accruing at rate credits per second, starting full. rate may be 0 (a key
// only spends its first burst) or math.Inf(1) (no limit); WithMaxKeys sets
// the cap on keys.
//
// NewLimiter returns an error matching credit.ErrInvalidRate for a
// negative or NaN rate, credit.ErrInvalidBurst for a burst outside
// [1, atomicsem.MaxPermits] or one that takes credit.MaxFill or longer to
// accrue, and ErrInvalidMaxKeys for a cap below 1. It panics if an option
// is nil.
func NewLimiter(rate float64, burst int64, opts ...Option) (*Limiter, error) {
	o, err := makeOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg, err := credit.NewConfig(rate, burst)
	if err != nil {
		return nil, errs.Reprefix("keyed", err)
	}
	l := &Limiter{cfg: cfg}
	l.t.init(o.maxKeys, l.idle)
	l.t.moved = l.moved
	l.t.compacted = dueHeapify
	l.t.makeRoom = l.makeRoom
	return l, nil
}

// MustNewLimiter is like NewLimiter but panics if the arguments are
// invalid. It simplifies the initialisation of package-level limiters:
//
//	var perClient = keyed.MustNewLimiter(10, 100) // 10 requests a second, bursts of 100, per key
func MustNewLimiter(rate float64, burst int64, opts ...Option) *Limiter {
	l, err := NewLimiter(rate, burst, opts...)
	if err != nil {
		panic(err)
	}
	return l
}

func (l *Limiter) valid() {
	if l == nil {
		panic("keyed: method called on a nil *Limiter")
	}
	if l.cfg == nil {
		panic("keyed: method called on a zero Limiter; make one with NewLimiter")
	}
}

// newEntry returns a new key's entry: a full bucket.
func newEntry() limEntry { return limEntry{} }

// entry returns key's entry in s, whose hi is locate's for key, or nil if
// s holds none. The pointer is good while s stays locked and no entry of
// s moves. It requires that s is locked.
func entry(s *limShard, key string, hi uint32) *limEntry {
	if i, _ := s.find(key, hi); i >= 0 {
		return &s.ents[i].v
	}
	return nil
}

// idle reports whether the entry at place i of s is indistinguishable
// from a new one: full, nothing reserved, nobody waiting. It requires that
// s is locked.
func (l *Limiter) idle(s *limShard, i int) bool {
	if s.lines[s.ents[i].key] != nil {
		return false
	}
	return s.ents[i].v.st.Full(l.cfg, l.cfg.Now())
}

// moved puts the entry that the table moved to place i, from the end of
// the heap, in its place. It requires that s is locked.
func (l *Limiter) moved(s *limShard, i int) {
	dueFix(s, i)
	s.dueTop.Store(dueHead(s))
}

// dueOf returns the moment from which the entry at place i of s can be
// dropped, as of now, or never while credit is reserved from it or a line
// waits on it (each of which lowers its due when it ends). It requires
// that s is locked.
func (l *Limiter) dueOf(s *limShard, i int, now int64) int64 {
	e := &s.ents[i]
	if s.lines[e.key] != nil || e.v.st.Reserved() != 0 {
		return never
	}
	if d, ok := e.v.st.Wait(l.cfg, now, l.cfg.Burst()); ok {
		return now + int64(d)
	}
	return never
}

// lowerDue makes the due of the entry at place i of s now, if it is
// later, after a change that can make the entry droppable sooner. It may
// move the entry. It requires that s is locked.
func (l *Limiter) lowerDue(s *limShard, i int, now int64) {
	if s.ents[i].v.due > now {
		setDue(s, i, now)
	}
}

// makeRoom drops the droppable entries at the heads of the shards' heaps,
// shard by shard from the cursor, until a shard yields one, and reports
// whether it dropped any. It takes one shard's lock at a time, and only
// those of shards whose head is due. A shard's heap holds every entry, and
// an entry's due is never after the moment it can be dropped, so it
// reports false only if no entry could be dropped when it looked at each
// shard.
func (l *Limiter) makeRoom() bool {
	now := l.cfg.Now()
	start := l.t.cursor.Add(1)
	for i := range uint32(numShards) {
		s := &l.t.shards[(start+i)%numShards]
		if s.dueTop.Load() > now {
			continue
		}
		s.mu.Lock()
		n := l.dropDue(s, now)
		s.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}

// dropDue looks at the entries of s whose due has come, head first: it
// drops those that can be dropped, gives the others their exact due, and
// returns how many it dropped. It requires that s is locked.
func (l *Limiter) dropDue(s *limShard, now int64) int {
	dropped := 0
	for dueHead(s) <= now {
		if l.idle(s, 0) {
			l.t.remove(s, 0)
			dropped++
			continue
		}
		setDue(s, 0, l.dueOf(s, 0, now))
	}
	l.t.count.Add(int64(-dropped))
	s.dueTop.Store(dueHead(s))
	return dropped
}

// checkRequest returns the error for a request of n credits that no wait
// could cover.
func (l *Limiter) checkRequest(n int64) error {
	switch {
	case n < 0:
		return errs.Errorf(atomicsem.ErrInvalidPermits, "keyed: a request for %d credits", n)
	case n > l.cfg.Burst():
		return errs.Errorf(atomicsem.ErrExceedsMax, "keyed: %d credits exceed the burst of %d", n, l.cfg.Burst())
	}
	return nil
}

// lock locks key's shard and returns it with key's hi (see locate) and
// entry, inserting a new entry if key is absent. On ErrTooManyKeys the
// shard is unlocked.
func (l *Limiter) lock(key string) (*limShard, uint32, *limEntry, error) {
	sh, hi := l.t.locate(key)
	sh.mu.Lock()
	if e := entry(sh, key, hi); e != nil {
		return sh, hi, e, nil
	}
	return l.lockNew(sh, key, hi)
}

// lockNew is lock for a key that was absent, outlined so that the path
// for a key present stays small. It requires that sh is locked.
func (l *Limiter) lockNew(sh *limShard, key string, hi uint32) (*limShard, uint32, *limEntry, error) {
	i, added, err := l.t.insert(sh, key, hi, newEntry)
	if err != nil {
		sh.mu.Unlock()
		return sh, hi, nil, err
	}
	if added { // full, and so droppable from now
		sh.ents[i].v.due = l.cfg.Now()
		i = dueUp(sh, i)
		sh.dueTop.Store(dueHead(sh))
	}
	return sh, hi, &sh.ents[i].v, nil
}

// TrySpend takes n credits from key's bucket for good if its balance
// covers them now, and reports whether it did. It fails, changing nothing,
// if n < 0 or n is more than the burst, if the balance is short, while a
// Spend or Acquire of the key waits, and if key is new and the table is
// full. TrySpend(key, 0) succeeds unless the table refuses key.
//
// On a key already present, TrySpend allocates nothing.
func (l *Limiter) TrySpend(key string, n int64) bool {
	l.valid()
	if n < 0 || n > l.cfg.Burst() {
		return false
	}
	sh, _, e, err := l.lock(key)
	if err != nil {
		return false
	}
	ok := false
	if sh.lines == nil || sh.lines[key] == nil {
		ok = e.st.TrySpend(l.cfg, l.cfg.Now(), n)
	}
	sh.mu.Unlock()
	return ok
}

// Spend takes n credits from key's bucket for good, waiting until its
// balance covers them, FIFO among the spends and acquires of the key.
// A waiter at the front of the line takes its credit at the moment it
// accrued, however late it wakes, so that a stream of spends keeps the
// rate.
//
// Spend returns nil once the credits are spent, at once for n == 0. On
// failure it spends nothing and returns:
//   - atomicsem.ErrInvalidPermits (wrapped) if n < 0;
//   - atomicsem.ErrExceedsMax (wrapped) if n is more than the burst;
//   - ctx.Err() if ctx is done before the credits are spent;
//   - ErrTooManyKeys if key is new and the table is full.
//
// It is a run-time error to pass a nil ctx; the panic's message begins
// "keyed: ".
func (l *Limiter) Spend(ctx context.Context, key string, n int64) error {
	l.valid()
	if ctx == nil {
		panic("keyed: Spend with a nil Context")
	}
	_, err := l.take(ctx, key, n, false)
	return err
}

// TryAcquire reserves n credits of key's bucket without waiting and
// returns a token for them: its Release gives them back, its Forget spends
// them, and reserved credit counts against the burst until then. It fails,
// returning the zero Token, in the cases TrySpend does. A reservation
// allocates its token's owner.
func (l *Limiter) TryAcquire(key string, n int64) (token.Token, bool) {
	l.valid()
	if n < 0 || n > l.cfg.Burst() {
		return token.Token{}, false
	}
	sh, _, e, err := l.lock(key)
	if err != nil {
		return token.Token{}, false
	}
	ok := false
	if sh.lines == nil || sh.lines[key] == nil {
		ok = e.st.TryReserve(l.cfg, l.cfg.Now(), n)
	}
	sh.mu.Unlock()
	if !ok {
		return token.Token{}, false
	}
	return token.New(&reservation{l: l, key: key}, n, 0), true
}

// Acquire reserves n credits of key's bucket, waiting as Spend does until
// the balance covers them, and returns a token for them. It fails,
// returning the zero Token, as Spend does.
func (l *Limiter) Acquire(ctx context.Context, key string, n int64) (token.Token, error) {
	l.valid()
	if ctx == nil {
		panic("keyed: Acquire with a nil Context")
	}
	if _, err := l.take(ctx, key, n, true); err != nil {
		return token.Token{}, err
	}
	return token.New(&reservation{l: l, key: key}, n, 0), nil
}

// take spends (or, with reserve, reserves) n credits of key, waiting in
// the key's line if it must. It returns whether it waited.
func (l *Limiter) take(ctx context.Context, key string, n int64, reserve bool) (bool, error) {
	if err := l.checkRequest(n); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	sh, hi, e, err := l.lock(key)
	if err != nil {
		return false, err
	}
	now := l.cfg.Now()
	if sh.lines == nil || sh.lines[key] == nil {
		var ok bool
		if reserve {
			ok = e.st.TryReserve(l.cfg, now, n)
		} else {
			ok = e.st.TrySpend(l.cfg, now, n)
		}
		if ok {
			sh.mu.Unlock()
			return false, nil
		}
	}
	w := join(sh, key, n, reserve, now)
	sh.mu.Unlock()
	return true, l.wait(ctx, sh, key, hi, w)
}

// Decision is what Take did and what the key's bucket holds after it.
type Decision struct {
	Spent   bool  // the credits were taken
	Balance int64 // the key's credit left
	// RetryIn is, when Spent is false, how long until accrual covers the
	// request after the credit that the key's waiting Spend and Acquire
	// calls are owed, counting the credit reserved from the key as spent:
	// positive, and -1 if accrual never covers it (at a rate of zero).
	// Credit given back by a reservation can only make the wait shorter.
	RetryIn time.Duration
	// FullIn is how long until the key's balance is the burst less the
	// credit reserved: -1 if it never is (at a rate of zero).
	FullIn time.Duration
}

// Take is TrySpend that also says what the key's bucket holds afterwards
// and when it will hold more, for a server to tell its client. It returns
// ErrTooManyKeys, with the zero Decision, if key is new and the table is
// full, and Spend's errors for an n that no wait could cover.
//
// On a key already present, Take allocates nothing.
func (l *Limiter) Take(key string, n int64) (Decision, error) {
	l.valid()
	if err := l.checkRequest(n); err != nil {
		return Decision{}, err
	}
	sh, _, e, err := l.lock(key)
	if err != nil {
		return Decision{}, err
	}
	st := &e.st
	now := l.cfg.Now()
	var d Decision
	if sh.lines == nil || sh.lines[key] == nil {
		d.Spent = st.TrySpend(l.cfg, now, n)
	}
	d.Balance = st.Balance(l.cfg, now)
	if !d.Spent {
		d.RetryIn = l.retryIn(sh.lines[key], st, now, n)
	}
	d.FullIn = l.waitFor(st, now, l.cfg.Burst()-st.Reserved())
	sh.mu.Unlock()
	return d, nil
}

// retryIn returns how long from now until accrual covers n credits after
// those that line waits for, with st's reserved credit counted as spent:
// at least a nanosecond, or -1 if accrual never covers them. It requires
// that the key's shard is locked.
func (l *Limiter) retryIn(line *waitLine, st *credit.State, now, n int64) time.Duration {
	need := n
	if line != nil {
		for w := line.head; w != nil; w = w.next {
			need += w.n
		}
	}
	t := *st
	if r := t.Reserved(); r != 0 {
		t.Forget(l.cfg, now, r)
	}
	burst := l.cfg.Burst()
	first := min(need, burst)
	d := l.waitFor(&t, now, first)
	if d < 0 {
		return -1
	}
	if more := need - first; more > 0 {
		// The waiters take credit as it accrues, so it goes on accruing
		// past the burst: whole fills of the burst, then the rest.
		var empty credit.State
		empty.TrySpend(l.cfg, now, burst)
		full := l.waitFor(&empty, now, burst)
		d += time.Duration(more/burst)*full + l.waitFor(&empty, now, more%burst)
	}
	return max(d, time.Nanosecond)
}

// waitFor returns how long from now until accrual raises st's balance to
// n, or -1 if it never does.
func (l *Limiter) waitFor(st *credit.State, now, n int64) time.Duration {
	if d, ok := st.Wait(l.cfg, now, n); ok {
		return d
	}
	return -1
}

// fillTime returns how long an empty bucket takes to fill, and false if it
// never does (at a rate of zero) or does at once (at an infinite rate).
func (l *Limiter) fillTime() (time.Duration, bool) {
	var st credit.State
	now := l.cfg.Now()
	st.TrySpend(l.cfg, now, l.cfg.Burst())
	d := l.waitFor(&st, now, l.cfg.Burst())
	return d, d > 0
}

// Balance returns the credit key's bucket holds now, and reports whether
// the table holds an entry for key; a key without one holds the burst.
func (l *Limiter) Balance(key string) (int64, bool) {
	l.valid()
	sh, hi := l.t.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := entry(sh, key, hi); e != nil {
		return e.st.Balance(l.cfg, l.cfg.Now()), true
	}
	return l.cfg.Burst(), false
}

// Burst returns the burst of every key's bucket.
func (l *Limiter) Burst() int64 { l.valid(); return l.cfg.Burst() }

// Rate returns the rate of every key's bucket, in credits per second.
func (l *Limiter) Rate() float64 { l.valid(); return l.cfg.Rate() }

// Len returns the number of keys the table holds now.
func (l *Limiter) Len() int { l.valid(); return l.t.len() }

// Sweep drops every key whose bucket is indistinguishable from a new one,
// and returns how many it dropped. The table drops such keys on its own
// only when it is full; Sweep is for a caller that wants the memory back at
// once.
func (l *Limiter) Sweep() int { l.valid(); return l.t.sweep() }

// reservation is the owner of a token from TryAcquire or Acquire: it
// settles the credit with the key's bucket. The key cannot have been
// dropped meanwhile, as a bucket with credit reserved is not full.
type reservation struct {
	l   *Limiter
	key string
}

func (r *reservation) ReturnPermits(n int64, _ uint32) { r.l.settle(r.key, n, true) }
func (r *reservation) ForgetPermits(n int64, _ uint32) { r.l.settle(r.key, n, false) }
func (r *reservation) SplitPermits(_, _ int64, tag uint32) (token.Owner, uint32) {
	return r, tag
}

// settle gives n reserved credits of key back (or, without back, spends
// them), and wakes the front of the key's line, which may now fit.
func (l *Limiter) settle(key string, n int64, back bool) {
	if n == 0 {
		return
	}
	sh, hi := l.t.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, _ := sh.find(key, hi)
	if i < 0 {
		return // unreachable: see reservation
	}
	now := l.cfg.Now()
	if st := &sh.ents[i].v.st; back {
		st.Release(l.cfg, now, n)
	} else {
		st.Forget(l.cfg, now, n)
	}
	l.lowerDue(sh, i, now)
	if line := sh.lines[key]; line != nil {
		line.head.poke()
	}
}
