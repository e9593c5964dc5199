// Package credit provides a credit bucket: credit that accrues at a steady
// rate up to a ceiling, is spent in bursts, and can be reserved and partly
// given back.
//
// A Bucket holds up to burst credits and gains rate credits per second
// while it holds fewer, so that after t seconds from empty, with nothing
// spent, the balance is exactly min(burst, ⌊rate·t⌋). Accrual is lazy: a
// bucket is one time stamp, the moment it was empty (the generic cell rate
// algorithm), and its balance is worked out from the clock when an
// operation looks; no goroutine, ticker or timer runs for it. Time spent
// full is not banked: the first credit taken out of a full bucket starts
// accrual anew.
//
// TrySpend takes credit for good if the balance covers it now; Spend waits
// for it in FIFO order, and takes it at the moment it accrued however late
// the waiter wakes, so that a stream of Spends keeps the rate. Acquire and
// TryAcquire reserve credit as a token.Token: Release gives the credit
// back, Forget spends it, and Split settles part of it each way. Reserved
// credit counts against the burst until it is settled. Most callers want
// TrySpend (drop or refuse what is over the rate) or Spend (shape a stream
// to the rate).
//
// A Config is a rate and burst worked out once; buckets made from it with
// Config.New share it, and State is a bucket without the Bucket, for
// callers that keep one per key. See docs/credit.md for the design and its
// guarantees.
package credit

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/internal/errs"
	"github.com/atomicsem/atomicsem/token"
)

var (
	// ErrInvalidRate is returned (wrapped, with the number) by New,
	// NewConfig and SetRate for a rate that is negative or NaN, and by
	// WithRate and SetRate for one at which the burst takes MaxFill or
	// longer to accrue.
	ErrInvalidRate = errors.New("credit: invalid rate")
	// ErrInvalidBurst is returned (wrapped, with the number) by New and
	// NewConfig for a burst below 1 or above atomicsem.MaxPermits, or one
	// that takes MaxFill or longer to accrue at the rate.
	ErrInvalidBurst = errors.New("credit: invalid burst")
	// ErrInvalidInitial is returned (wrapped, with the numbers) by New for
	// a WithInitial balance outside [0, burst].
	ErrInvalidInitial = errors.New("credit: invalid initial balance")
)

// Bucket is a credit bucket of a fixed burst whose credit accrues at a rate
// that may change. Its methods are safe for concurrent use.
//
// The balance never exceeds the burst less the credit reserved; it accrues
// at the rate while below that, in whole credits, with the fraction kept.
// A rate of zero accrues nothing (the bucket only spends what it holds);
// an infinite rate refills it whenever it is looked at.
//
// TrySpend and TryAcquire never wait. Spend and Acquire wait while the
// balance is short, in FIFO order: while any of them waits, neither they
// nor TrySpend and TryAcquire take credit ahead of it, so a large request
// is never starved by small ones. Only the waiter at the front of the line
// sleeps on a timer, its own, set for the moment its credit will have
// accrued; the others wait behind it, and a waiter whose context is done
// leaves the line at once.
//
// # Memory ordering
//
// Credit given back by a token's Release synchronizes before the return of
// the spend or acquire that takes it.
//
// A Bucket must be made with New, MustNew or Config.New; the zero value is
// not usable.
type Bucket struct {
	mu sync.Mutex
	// cfg is the rate and burst, replaced by SetRate. Guarded by mu: a
	// spend reads the clock under mu, so that spends take their credit in
	// the order of their clock readings.
	cfg *Config
	st  State // guarded by mu
	// head and tail are the line of Spend and Acquire calls waiting, in
	// arrival order; head is the one that watches the accrual. Guarded by
	// mu.
	head, tail *waiter
	waiters    int32 // the length of the line; guarded by mu
	// burst is cfg's burst, which no SetRate changes, kept where a request
	// can be checked without mu (MaxPermits fits 32 bits).
	burst int32
}

// An Option configures a Bucket in New.
type Option func(*options)

type options struct {
	initial    int64
	hasInitial bool
}

// WithInitial sets the balance a new bucket starts with, in [0, burst];
// without it a bucket starts full. Accrual starts at New, with no fraction
// carried.
func WithInitial(n int64) Option {
	return func(o *options) { o.initial, o.hasInitial = n, true }
}

// New returns a bucket that accrues rate credits per second up to burst,
// starting full unless WithInitial says otherwise. rate may be 0 (the
// bucket only spends what it holds) or math.Inf(1) (no limit). The rate is
// held as NewConfig holds it; New with the rate and burst of the bucket it
// made last shares that bucket's Config.
//
// New returns ErrInvalidRate for a negative or NaN rate, ErrInvalidBurst
// for a burst outside [1, atomicsem.MaxPermits] or one that takes MaxFill
// or longer to accrue at the rate, and ErrInvalidInitial for an initial
// balance outside [0, burst]. It panics if an option is nil.
func New(rate float64, burst int64, opts ...Option) (*Bucket, error) {
	if err := checkRate(rate); err != nil {
		return nil, err
	}
	if err := checkBurst(burst); err != nil {
		return nil, err
	}
	c, err := configFor(rate, burst)
	if err != nil {
		return nil, err
	}
	return c.New(opts...)
}

// MustNew is like New but panics if the arguments are invalid. It
// simplifies the initialisation of package-level buckets:
//
//	var api = credit.MustNew(10, 100) // 10 requests a second, bursts of 100
func MustNew(rate float64, burst int64, opts ...Option) *Bucket {
	b, err := New(rate, burst, opts...)
	if err != nil {
		panic(err)
	}
	return b
}

// New returns a bucket of c's rate and burst, starting full unless
// WithInitial says otherwise, or ErrInvalidInitial for an initial balance
// outside [0, burst]. It panics if an option is nil. The bucket shares c;
// its SetRate changes its own rate only.
func (c *Config) New(opts ...Option) (*Bucket, error) {
	c.check("Config.New")
	initial := c.burst
	if len(opts) > 0 {
		initial = c.initialOf(opts)
		if initial < 0 || initial > c.burst {
			return nil, fmt.Errorf("%w: %d is outside [0, %d]", ErrInvalidInitial, initial, c.burst)
		}
	}
	b := &Bucket{cfg: c, burst: int32(c.burst)}
	if initial != c.burst {
		b.st = newState(c, c.Now(), initial)
	}
	return b, nil
}

// initialOf applies opts and returns the initial balance they set. It is
// outlined so that the options, which escape to the functions that set
// them, are allocated only when there are any.
func (c *Config) initialOf(opts []Option) int64 {
	o := options{initial: c.burst}
	for _, opt := range opts {
		if opt == nil {
			panic("credit: nil Option")
		}
		opt(&o)
	}
	return o.initial
}

// MustNew is like New but panics if the arguments are invalid.
func (c *Config) MustNew(opts ...Option) *Bucket {
	c.check("Config.MustNew")
	b, err := c.New(opts...)
	if err != nil {
		panic(err)
	}
	return b
}

// checkRequest validates a request for n credits.
func (b *Bucket) checkRequest(n int64) error {
	switch burst := int64(b.burst); {
	case n < 0:
		return errs.Errorf(atomicsem.ErrInvalidPermits, "credit: a request for %d credits", n)
	case n > burst:
		return errs.Errorf(atomicsem.ErrExceedsMax, "credit: %d credits exceed the burst of %d", n, burst)
	}
	return nil
}

// check panics, naming op, if b or ctx is nil: a caller bug that would
// otherwise surface as a nil dereference far from the call.
func (b *Bucket) check(op string, ctx context.Context) {
	if b == nil {
		panic("credit: " + op + " on a nil *Bucket")
	}
	if ctx == nil {
		panic("credit: " + op + " with a nil Context")
	}
}

func (b *Bucket) checkNil(op string) {
	if b == nil {
		panic("credit: " + op + " on a nil *Bucket")
	}
}

// TrySpend takes n credits for good if the balance covers them now, and
// reports whether it did. It fails, changing nothing, if n < 0 or n is more
// than the burst, if the balance is short, and while a Spend or Acquire
// waits (it never overtakes one). TrySpend(0) succeeds.
//
// TrySpend reads the monotonic clock once and allocates nothing.
func (b *Bucket) TrySpend(n int64) bool {
	b.checkNil("TrySpend")
	b.mu.Lock()
	c := b.cfg
	ok := b.head == nil && b.st.TrySpend(c, c.Now(), n) || n == 0
	b.mu.Unlock()
	return ok
}

// Spend takes n credits for good, waiting until the balance covers them.
// Spends and acquires that must wait are served in FIFO order, each at the
// moment its credit accrued.
//
// Spend returns nil once the credits are spent, at once for n == 0. On
// failure it spends nothing and returns:
//   - atomicsem.ErrInvalidPermits (wrapped) if n < 0;
//   - atomicsem.ErrExceedsMax (wrapped) if n is more than the burst, which
//     no wait could cover;
//   - ctx.Err() if ctx is done before the credits are spent, including when
//     the call begins.
//
// Spend does not guess whether ctx's deadline leaves time enough: credit
// given back by a reservation can arrive sooner than accrual, so a Spend
// whose deadline passes first returns ctx.Err() then.
//
// It is a run-time error if ctx is nil; Spend then panics.
func (b *Bucket) Spend(ctx context.Context, n int64) error {
	b.check("Spend", ctx)
	if err := b.checkRequest(n); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	b.mu.Lock()
	if c := b.cfg; b.head == nil && b.st.TrySpend(c, c.Now(), n) {
		b.mu.Unlock()
		return nil
	}
	_, err := b.wait(ctx, n, true)
	return err
}

// TryAcquire reserves n credits without waiting and returns a token for
// them: its Release gives them back to the bucket, its Forget spends them.
// It fails, returning the zero Token, in the cases TrySpend does.
// TryAcquire(0) returns a token for nothing.
func (b *Bucket) TryAcquire(n int64) (token.Token, bool) {
	b.checkNil("TryAcquire")
	if n == 0 {
		return token.Empty(), true
	}
	b.mu.Lock()
	c := b.cfg
	ok := b.head == nil && n > 0 && b.st.TryReserve(c, c.Now(), n)
	b.mu.Unlock()
	if !ok {
		return token.Token{}, false
	}
	return token.New(&reservation{b: b, left: n}, n, 0), true
}

// Acquire reserves n credits, waiting as Spend does until the balance
// covers them, and returns a token for them: its Release gives them back,
// its Forget spends them, and its Split divides them. Reserved credit
// counts against the burst until the token ends.
//
// Acquire fails, returning the zero Token, as Spend does; Acquire(ctx, 0)
// returns a token for nothing. It is a run-time error if ctx is nil;
// Acquire then panics.
func (b *Bucket) Acquire(ctx context.Context, n int64) (token.Token, error) {
	b.check("Acquire", ctx)
	if err := b.checkRequest(n); err != nil {
		return token.Token{}, err
	}
	if err := ctx.Err(); err != nil {
		return token.Token{}, err
	}
	if n == 0 {
		return token.Empty(), nil
	}
	b.mu.Lock()
	if c := b.cfg; b.head == nil && b.st.TryReserve(c, c.Now(), n) {
		b.mu.Unlock()
		return token.New(&reservation{b: b, left: n}, n, 0), nil
	}
	return b.wait(ctx, n, false)
}

// SetRate changes the rate. The accrual up to now is settled at the old
// rate first, and the fraction of a credit accrued carries over, rounded
// down to the nanosecond at the new rate. A waiting Spend or Acquire looks
// at the new rate at once.
//
// SetRate returns ErrInvalidRate for a negative or NaN rate, and for one
// at which the burst takes MaxFill or longer to accrue, changing nothing.
func (b *Bucket) SetRate(rate float64) error {
	b.checkNil("SetRate")
	if err := checkRate(rate); err != nil {
		return err
	}
	b.mu.Lock()
	c := b.cfg
	b.mu.Unlock()
	next, err := c.WithRate(rate) // burst and clock are the bucket's for good
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c = b.cfg
	b.st.Rerate(c, next, c.Now())
	b.cfg = next
	b.pokeLocked()
	return nil
}

// Stats is a snapshot of a bucket.
type Stats struct {
	Balance  int64   // credit available now, with the accrual up to now
	Reserved int64   // credit held by tokens from Acquire and TryAcquire
	Burst    int64   // the ceiling of Balance + Reserved
	Rate     float64 // credits per second, as last set
	Waiters  int     // Spend and Acquire calls waiting
}

// Stats returns a snapshot of the bucket. It takes the bucket's lock; it
// is meant for monitoring and tests.
func (b *Bucket) Stats() Stats {
	b.checkNil("Stats")
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.cfg
	return Stats{
		Balance:  b.st.Balance(c, c.Now()),
		Reserved: b.st.Reserved(),
		Burst:    c.burst,
		Rate:     c.rateF,
		Waiters:  int(b.waiters),
	}
}
