// Package credit provides a credit bucket: credit that accrues at a steady
// rate up to a ceiling, is spent in bursts, and can be reserved and partly
// given back.
//
// A Bucket holds up to burst credits and gains rate credits per second
// while it holds fewer. Accrual is lazy: no goroutine or ticker runs; the
// credit due for the time since the last look is added, in whole credits,
// when an operation needs it, and the fraction of a credit not yet accrued
// is kept, so that after t seconds from empty, with nothing spent, the
// balance is exactly min(burst, ⌊rate·t⌋). Time spent full is not banked:
// the first credit taken out of a full bucket starts accrual anew. (So that
// a spend need not read the clock to know, one timer marks a bucket full
// when its accrual fills it.)
//
// TrySpend takes credit for good if the balance covers it now; Spend waits
// for it in FIFO order. Acquire and TryAcquire reserve credit as a
// token.Token: Release gives the credit back, Forget spends it, and Split
// settles part of it each way. Reserved credit counts against the burst
// until it is settled. Most callers want TrySpend (drop or refuse what is
// over the rate) or Spend (shape a stream to the rate).
//
// A Bucket is an atomicsem.Semaphore whose maximum is the burst and whose
// limit is the credit in circulation, available plus reserved: spending
// takes available permits out of circulation, and accrual adds new ones
// with Refill. See docs/credit.md for the design and its guarantees.
package credit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

var (
	// ErrInvalidRate is returned (wrapped, with the number) by New and
	// SetRate for a rate that is negative or NaN.
	ErrInvalidRate = errors.New("credit: invalid rate")
	// ErrInvalidBurst is returned (wrapped, with the number) by New for a
	// burst below 1 or above atomicsem.MaxPermits.
	ErrInvalidBurst = errors.New("credit: invalid burst")
	// ErrInvalidInitial is returned (wrapped, with the numbers) by New for
	// a WithInitial balance outside [0, burst].
	ErrInvalidInitial = errors.New("credit: invalid initial balance")
)

// Bucket is a credit bucket of a fixed burst whose credit accrues at a rate
// that may change. Its methods are safe for concurrent use.
//
// The balance never exceeds the burst less the credit reserved; it accrues
// at the rate while below that, in whole credits, with the fraction kept
// between calls. A rate of zero accrues nothing (the bucket only spends
// what it holds); an infinite rate refills it whenever it is looked at.
//
// TrySpend and TryAcquire never wait. Spend and Acquire wait while the
// balance is short, in FIFO order: while any of them waits, neither they
// nor TrySpend and TryAcquire take credit ahead of it, so a large request
// is never starved by small ones. Only the waiter at the front of the line
// sleeps on a timer, set for the moment its credit will have accrued; the
// others wait behind it, and a waiter whose context is done leaves the
// line at once, its timer stopped.
//
// Under contention a TrySpend or TryAcquire that finds another goroutine
// minting the same accrual fails rather than wait for it, so the balance
// may briefly read low; it never reads high.
//
// # Memory ordering
//
// Credit given back by a token's Release synchronizes before the return of
// the spend or acquire that takes it, as in atomicsem.
//
// A Bucket must be made with New or MustNew; the zero value is not usable.
type Bucket struct {
	// sem is the credit account: its maximum is the burst, its limit the
	// credit in circulation, its held permits the credit reserved.
	sem *atomicsem.Semaphore
	// waiting counts Spend and Acquire calls past their fast paths; while
	// it is not zero the fast paths refuse, so as not to overtake them.
	waiting atomic.Int32
	// full is set while the bucket is full and nothing accrues; a spend
	// that finds it set settles the accrual, which restarts it then (see
	// accrual.go).
	full atomic.Bool

	burst int64
	// epoch is the origin of the bucket's clock: times are nanoseconds
	// since it, read from the monotonic clock.
	epoch time.Time
	// line orders the waiters: a FIFO lock of one permit, held by the
	// waiter at the front.
	line *atomicsem.Semaphore

	mu     sync.Mutex
	origin int64   // when accrual last started, ns since epoch; guarded by mu
	minted uint64  // credits added since origin; guarded by mu
	rate   ratio   // guarded by mu
	rateF  float64 // the rate as given; guarded by mu
	// lastLimit is the semaphore's limit as the last settle left it; the
	// limit falls below it only by the spends made since. Guarded by mu.
	lastLimit int64
	// poke cancels the front waiter's park, so that it looks at the
	// accrual again; nil while it is not parked. Guarded by mu.
	poke context.CancelFunc
	// fill marks the bucket full when accrual fills it (see armFillLocked);
	// fillAt is when it is set to fire, 0 when it is not. Guarded by mu.
	fill   *time.Timer
	fillAt int64

	// clock, if set, replaces the monotonic clock (tests only).
	clock func() int64
}

// An Option configures a Bucket in New.
type Option func(*config)

type config struct {
	initial    int64
	hasInitial bool
}

// WithInitial sets the balance a new bucket starts with, in [0, burst];
// without it a bucket starts full. Accrual starts at New, with no fraction
// carried.
func WithInitial(n int64) Option {
	return func(c *config) { c.initial, c.hasInitial = n, true }
}

// New returns a bucket that accrues rate credits per second up to burst,
// starting full unless WithInitial says otherwise. rate may be 0 (the
// bucket only spends what it holds) or math.Inf(1) (no limit).
//
// The rate is held as the fraction of whole numbers p/q credits per second
// nearest to it with q ≤ 10^9: exactly, for rates such as 10, 7.3, 1.0/3
// and 1.0/3600, and otherwise within 10^-9 credits per second (less than
// one credit in 30 years). Rates below one credit in 63 years count as 0.
//
// New returns ErrInvalidRate for a negative or NaN rate, ErrInvalidBurst
// for a burst outside [1, atomicsem.MaxPermits], and ErrInvalidInitial for
// an initial balance outside [0, burst].
func New(rate float64, burst int64, opts ...Option) (*Bucket, error) {
	if err := checkRate(rate); err != nil {
		return nil, err
	}
	if burst < 1 || burst > atomicsem.MaxPermits {
		return nil, fmt.Errorf("%w: burst %d is outside [1, %d]", ErrInvalidBurst, burst, atomicsem.MaxPermits)
	}
	cfg := config{initial: burst}
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.initial < 0 || cfg.initial > burst {
		return nil, fmt.Errorf("%w: %d is outside [0, %d]", ErrInvalidInitial, cfg.initial, burst)
	}
	b := &Bucket{
		sem:   atomicsem.MustNew(cfg.initial, burst),
		burst: burst,
		epoch: time.Now(),
		line:  atomicsem.MustNew(1, 1),
		rate:  ratioOf(rate),
		rateF: rate,
	}
	b.lastLimit = cfg.initial
	if cfg.initial == burst {
		b.full.Store(true)
	} else {
		b.mu.Lock()
		b.armFillLocked(0)
		b.mu.Unlock()
	}
	return b, nil
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

// checkRequest validates a request for n credits.
func (b *Bucket) checkRequest(n int64) error {
	switch {
	case n < 0:
		return fmt.Errorf("credit: a request for %d credits (%w)", n, atomicsem.ErrInvalidPermits)
	case n > b.burst:
		return fmt.Errorf("credit: %d credits exceed the burst of %d (%w)", n, b.burst, atomicsem.ErrExceedsMax)
	}
	return nil
}

// TrySpend takes n credits for good if the balance covers them now, and
// reports whether it did. It fails, changing nothing, if n < 0 or n is more
// than the burst, if the balance is short, and while a Spend or Acquire
// waits (it never overtakes one). TrySpend(0) succeeds.
//
// With the balance enough, TrySpend is one compare-and-swap: it reads no
// clock and allocates nothing. Only when the balance is short does it mint
// the accrual due, which reads the clock.
func (b *Bucket) TrySpend(n int64) bool {
	if n > 0 && b.waiting.Load() == 0 {
		if _, ok := b.sem.TryForget(n); ok {
			b.spent()
			return true
		}
	}
	return b.trySpendSlow(n)
}

// trySpendSlow is TrySpend after the balance alone did not cover n: it
// mints the accrual due and spends from it. A goroutine that finds the
// accrual being minted by another fails rather than wait: the other is
// crediting the same interval.
func (b *Bucket) trySpendSlow(n int64) bool {
	switch {
	case n == 0:
		return true
	case n < 0 || n > b.burst || b.waiting.Load() != 0:
		return false
	case !b.mu.TryLock():
		return false
	}
	took := b.settleLocked(n)
	b.mu.Unlock()
	return took
}

// Spend takes n credits for good, waiting until the balance covers them.
// Spends and acquires that must wait are served in FIFO order.
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
func (b *Bucket) Spend(ctx context.Context, n int64) error {
	if err := b.checkRequest(n); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if b.waiting.Load() == 0 {
		if _, ok := b.sem.TryForget(n); ok {
			b.spent()
			return nil
		}
		b.mu.Lock()
		took := b.settleLocked(n)
		b.mu.Unlock()
		if took {
			return nil
		}
	}
	_, err := b.wait(ctx, n, true)
	return err
}

// TryAcquire reserves n credits without waiting and returns a token for
// them: its Release gives them back to the bucket, its Forget spends them.
// It fails, returning the zero Token, in the cases TrySpend does.
// TryAcquire(0) returns a token for nothing.
func (b *Bucket) TryAcquire(n int64) (token.Token, bool) {
	if n == 0 {
		return token.New(noCredit{}, 0, 0), true
	}
	if n < 0 || n > b.burst || b.waiting.Load() != 0 {
		return token.Token{}, false
	}
	r := b.tryReserve(n)
	if r == nil {
		if !b.mu.TryLock() {
			return token.Token{}, false
		}
		b.settleLocked(0)
		r = b.tryReserve(n)
		b.mu.Unlock()
		if r == nil {
			return token.Token{}, false
		}
	}
	return token.New(r, n, 0), true
}

// Acquire reserves n credits, waiting as Spend does until the balance
// covers them, and returns a token for them: its Release gives them back,
// its Forget spends them, and its Split divides them. Reserved credit
// counts against the burst until the token ends.
//
// Acquire fails, returning the zero Token, as Spend does; Acquire(ctx, 0)
// returns a token for nothing.
func (b *Bucket) Acquire(ctx context.Context, n int64) (token.Token, error) {
	if err := b.checkRequest(n); err != nil {
		return token.Token{}, err
	}
	if err := ctx.Err(); err != nil {
		return token.Token{}, err
	}
	if n == 0 {
		return token.New(noCredit{}, 0, 0), nil
	}
	if b.waiting.Load() == 0 {
		r := b.tryReserve(n)
		if r == nil {
			b.mu.Lock()
			b.settleLocked(0)
			r = b.tryReserve(n)
			b.mu.Unlock()
		}
		if r != nil {
			return token.New(r, n, 0), nil
		}
	}
	return b.wait(ctx, n, false)
}

// SetRate changes the rate. The accrual up to now is settled at the old
// rate first, and the fraction of a credit accrued carries over, rounded
// down to the nanosecond at the new rate. A waiting Spend or Acquire looks
// at the new rate at once.
//
// SetRate returns ErrInvalidRate for a negative or NaN rate, changing
// nothing.
func (b *Bucket) SetRate(rate float64) error {
	if err := checkRate(rate); err != nil {
		return err
	}
	next := ratioOf(rate)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settleLocked(0)
	if !b.full.Load() {
		now := b.now()
		b.origin = now - carry(b.rate, next, now-b.origin, b.minted)
		b.minted = 0
	}
	b.rate, b.rateF = next, rate
	b.fillAt = 0 // the timer may be set for a moment the new rate does not reach
	if !b.full.Load() {
		b.armFillLocked(b.now())
	}
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

// Stats mints the accrual due and returns a snapshot of the bucket. It
// takes the bucket's lock; it is meant for monitoring and tests.
func (b *Bucket) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settleLocked(0)
	st := b.sem.Stats()
	return Stats{
		Balance:  st.Available,
		Reserved: st.Held,
		Burst:    b.burst,
		Rate:     b.rateF,
		Waiters:  int(b.waiting.Load()),
	}
}

// now returns the time in nanoseconds since the bucket's epoch.
func (b *Bucket) now() int64 {
	if b.clock != nil {
		return b.clock()
	}
	return int64(time.Since(b.epoch))
}
