package keyed

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credit"
	"github.com/atomicsem/atomicsem/token"
)

// Limiter is a table of credit buckets, one per key, all of one rate and
// burst: each key's credit accrues at the rate up to the burst, as in
// credit.Bucket. Its methods are safe for concurrent use.
//
// A key's bucket is made full at the key's first use and dropped once it
// is full again with nobody waiting on it and nothing reserved from it:
// then it is indistinguishable from a new one.
//
// TrySpend takes credit for good if the key's balance covers it now; Spend
// waits for it, FIFO among the callers of the same key; TryAcquire and
// Acquire reserve credit as a token.Token that can be given back. Take is
// TrySpend with what an HTTP server needs to tell the client.
//
// # Memory ordering
//
// As in credit, per key: credit given back by a token's Release
// synchronizes before the return of the spend or acquire of the same key
// that takes it.
//
// A Limiter must be made with NewLimiter; the zero value is not usable.
type Limiter struct {
	t     table[limEntry]
	rate  float64
	burst int64
}

// limEntry is one key's bucket.
type limEntry struct {
	b *credit.Bucket
	// waiting counts the Spend and Acquire calls on this entry that have
	// left the shard lock to wait. The entry is not dropped while any
	// waits.
	waiting atomic.Int32
}

// NewLimiter returns a table whose keys each get a bucket of burst credits
// accruing at rate credits per second. rate may be 0 (a key only spends its
// first burst) or math.Inf(1) (no limit); WithMaxKeys sets the cap on keys.
//
// NewLimiter returns credit.ErrInvalidRate (wrapped) for a negative or NaN
// rate, credit.ErrInvalidBurst (wrapped) for a burst outside
// [1, atomicsem.MaxPermits], and ErrInvalidMaxKeys for a cap below 1.
func NewLimiter(rate float64, burst int64, opts ...Option) (*Limiter, error) {
	o, err := makeOptions(opts)
	if err != nil {
		return nil, err
	}
	if _, err := credit.New(rate, burst); err != nil {
		return nil, err
	}
	l := &Limiter{rate: rate, burst: burst}
	l.t.init(o.maxKeys, l.idle)
	return l, nil
}

func (l *Limiter) valid() {
	if l == nil {
		panic("keyed: method called on a nil *Limiter")
	}
}

func (l *Limiter) newEntry() *limEntry {
	return &limEntry{b: credit.MustNew(l.rate, l.burst)}
}

// idle reports whether e is indistinguishable from a new entry. It
// requires that e's shard is write-locked.
func (l *Limiter) idle(e *limEntry) bool {
	if e.waiting.Load() != 0 {
		return false
	}
	st := e.b.Stats()
	return st.Balance == l.burst && st.Waiters == 0
}

// checkRequest returns the error that credit returns for a request of n.
func (l *Limiter) checkRequest(n int64) error {
	switch {
	case n < 0:
		return fmt.Errorf("%w: keyed: a request for %d credits", atomicsem.ErrInvalidPermits, n)
	case n > l.burst:
		return fmt.Errorf("%w: keyed: %d credits exceed the burst of %d", atomicsem.ErrExceedsMax, n, l.burst)
	}
	return nil
}

// entry returns key's entry, made if absent. With wait set it counts the
// entry as waited on, so that it is not dropped until the caller is done
// with it.
func (l *Limiter) entry(key string, wait bool) (*limEntry, error) {
	sh := l.t.shardOf(key)
	sh.mu.RLock()
	if e := sh.m[key]; e != nil {
		if wait {
			e.waiting.Add(1)
		}
		sh.mu.RUnlock()
		return e, nil
	}
	sh.mu.RUnlock()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, err := l.t.insert(sh, key, l.newEntry)
	if err == nil && wait {
		e.waiting.Add(1)
	}
	return e, err
}

// TrySpend takes n credits from key's bucket for good if its balance
// covers them now, and reports whether it did. It fails, changing nothing,
// if n < 0 or n is more than the burst, if the balance is short, while a
// Spend or Acquire of the key waits, and if key is new and the table is
// full. TrySpend(key, 0) succeeds unless the table refuses key.
func (l *Limiter) TrySpend(key string, n int64) bool {
	l.valid()
	if l.checkRequest(n) != nil {
		return false
	}
	sh := l.t.shardOf(key)
	sh.mu.RLock()
	if e := sh.m[key]; e != nil {
		ok := e.b.TrySpend(n)
		sh.mu.RUnlock()
		return ok
	}
	sh.mu.RUnlock()
	return l.trySpendNew(sh, key, n)
}

func (l *Limiter) trySpendNew(sh *shard[limEntry], key string, n int64) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, err := l.t.insert(sh, key, l.newEntry)
	return err == nil && e.b.TrySpend(n)
}

// Spend takes n credits from key's bucket for good, waiting until its
// balance covers them, FIFO among the spends and acquires of the key.
// It returns nil once the credits are spent, at once for n == 0. On
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
	if err := l.checkRequest(n); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	e, err := l.entry(key, true)
	if err != nil {
		return err
	}
	defer e.waiting.Add(-1)
	return e.b.Spend(ctx, n)
}

// TryAcquire reserves n credits of key's bucket without waiting and
// returns a token for them: its Release gives them back, its Forget spends
// them. It fails, returning the zero Token, in the cases TrySpend does.
func (l *Limiter) TryAcquire(key string, n int64) (token.Token, bool) {
	l.valid()
	if l.checkRequest(n) != nil {
		return token.Token{}, false
	}
	e, err := l.entry(key, false)
	if err != nil {
		return token.Token{}, false
	}
	return e.b.TryAcquire(n)
}

// Acquire reserves n credits of key's bucket, waiting as Spend does until
// the balance covers them, and returns a token for them. It fails,
// returning the zero Token, as Spend does.
func (l *Limiter) Acquire(ctx context.Context, key string, n int64) (token.Token, error) {
	l.valid()
	if ctx == nil {
		panic("keyed: Acquire with a nil Context")
	}
	if err := l.checkRequest(n); err != nil {
		return token.Token{}, err
	}
	if err := ctx.Err(); err != nil {
		return token.Token{}, err
	}
	e, err := l.entry(key, true)
	if err != nil {
		return token.Token{}, err
	}
	defer e.waiting.Add(-1)
	return e.b.Acquire(ctx, n)
}

// Decision is what Take did and what the key's bucket holds after it.
type Decision struct {
	Spent   bool          // the credits were taken
	Balance int64         // the key's credit left
	RetryIn time.Duration // when not Spent: how long until the balance covers the request, if nothing else is spent
	FullIn  time.Duration // how long until the key's bucket is full
}

// Take is TrySpend that also says what the key's bucket holds afterwards
// and when it will hold more, for a server to tell its client. It returns
// ErrTooManyKeys, with the zero Decision, if key is new and the table is
// full, and the errors of Spend for an invalid n.
func (l *Limiter) Take(key string, n int64) (Decision, error) {
	l.valid()
	if err := l.checkRequest(n); err != nil {
		return Decision{}, err
	}
	e, err := l.entry(key, true)
	if err != nil {
		return Decision{}, err
	}
	defer e.waiting.Add(-1)
	d := Decision{Spent: e.b.TrySpend(n)}
	d.Balance = e.b.Stats().Balance
	d.FullIn = l.timeFor(l.burst - d.Balance)
	if !d.Spent {
		d.RetryIn = l.timeFor(n - d.Balance)
	}
	return d, nil
}

// timeFor returns how long c credits take to accrue, at most.
func (l *Limiter) timeFor(c int64) time.Duration {
	if c <= 0 || math.IsInf(l.rate, 1) {
		return 0
	}
	if l.rate == 0 {
		return math.MaxInt64
	}
	return time.Duration(math.Ceil(float64(c) / l.rate * 1e9))
}

// fillTime returns how long an empty bucket takes to fill, and false if it
// never does or does at once.
func (l *Limiter) fillTime() (time.Duration, bool) {
	if l.rate == 0 || math.IsInf(l.rate, 1) {
		return 0, false
	}
	return l.timeFor(l.burst), true
}

// Balance returns the credit key's bucket holds now, and reports whether
// the table holds an entry for key; a key without one holds the burst.
func (l *Limiter) Balance(key string) (int64, bool) {
	l.valid()
	sh := l.t.shardOf(key)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	if e := sh.m[key]; e != nil {
		return e.b.Stats().Balance, true
	}
	return l.burst, false
}

// Burst returns the burst of every key's bucket.
func (l *Limiter) Burst() int64 { l.valid(); return l.burst }

// Rate returns the rate of every key's bucket, in credits per second.
func (l *Limiter) Rate() float64 { l.valid(); return l.rate }

// Len returns the number of keys the table holds now.
func (l *Limiter) Len() int { l.valid(); return l.t.len() }

// Sweep drops every key whose bucket is indistinguishable from a new one,
// and returns how many it dropped. The table drops such keys on its own as
// it inserts new ones; Sweep is for a caller that wants the memory back at
// once.
func (l *Limiter) Sweep() int { l.valid(); return l.t.sweep() }

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
