package rediscredit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/internal/errs"
)

// DefaultLeaseInterval is a Lease's interval unless WithLeaseInterval sets
// another.
const DefaultLeaseInterval = 100 * time.Millisecond

// leaseTrip bounds a lease's round trip to Redis (and the final one of
// Close, unless its context ends it sooner).
const leaseTrip = time.Second

// ErrLeaseClosed is returned by a Lease's methods after Close.
var ErrLeaseClosed = errors.New("rediscredit: lease is closed")

// A LeaseOption configures a Lease.
type LeaseOption func(*leaseOptions) error

type leaseOptions struct {
	interval time.Duration
}

// WithLeaseInterval sets a Lease's interval: the stretch of its demand
// that a block covers, and how long credit it holds may go unspent before
// it is given back (DefaultLeaseInterval otherwise). It must be at least a
// millisecond and at most a quarter of the Limiter's hold (WithHold),
// since a reservation must be renewed within the hold.
func WithLeaseInterval(d time.Duration) LeaseOption {
	return func(o *leaseOptions) error {
		if d < time.Millisecond {
			return fmt.Errorf("rediscredit: lease interval %v is under a millisecond", d)
		}
		o.interval = d
		return nil
	}
}

// A Lease spends one key's credit in this process, from blocks of it
// reserved in Redis: a call to Redis takes a block for many local spends,
// which cost an atomic operation each, as a credit.Bucket's do.
//
// # Model
//
// The lease keeps the credit it has taken in a local pool (an atomicsem
// semaphore whose limit is the credit). A spend takes from the pool. The
// pool is topped up ahead of need, in the background, by one round trip
// that settles what was spent since the last one, gives back what is not
// needed and reserves a new block: about what the process spends in one
// interval (WithLeaseInterval), measured as it spends, and at most half of
// what the bucket has not reserved for others, so that blocks leave room
// for the rest of the fleet. The top-up starts when the pool falls below a
// quarter of a block. Credit the process does not spend for an interval
// goes back, all of it, and a pool that holds more than two blocks gives
// back the surplus, so that idle credit returns to the fleet within an
// interval and three eighths of the process's last spend, plus a round
// trip (the lease looks at its pool every quarter interval, or at a random
// eighth to three eighths while the fleet is short). When a call leaves
// Redis with nothing to grant (the fleet wants the rate or more), the
// lease asks again after a random eighth to three eighths of an interval
// (an interval, if Redis forecasts the credit later than that), whether
// or not it got its block, and until then answers a TrySpend that its
// pool cannot cover from Redis's last answer: a lease makes about four
// round trips per interval however great its demand, and the leases that
// wait take turns at what accrues, in no fixed order. The turns share the
// rate among them roughly, not by max-min fairness: see docs/fleet.md.
//
// # The laws stay exact
//
// The credit a lease holds is reserved in the Redis bucket, and reserved
// credit counts against the burst there, as TryReserve's does: accrual
// stops while the balance, the reservations and the leases' credit fill
// the burst. So the credit that can be spent at any moment, in Redis and
// in every process together, is never more than the burst, and in every
// window of length w the fleet spends at most burst + ⌊rate·w⌋, on
// Redis's clock, whatever the blocks and however many processes lease.
// What leasing changes is the order: spends are no longer served across
// processes in the order they arrive at Redis, but from whichever
// process holds the credit. Spent credit stays reserved until the next
// call settles it, so a lease's block holds back accrual by at most its
// size.
//
// # Failure
//
// A lease's reservation in Redis lasts at least the Limiter's hold past
// its last call, and is dropped between one and two holds after it: a
// process that dies, or loses Redis, holds its credit out of the fleet
// for at most twice the hold, and the room it leaves then refills at the
// rate (dropped credit is counted as spent, never given back as credit,
// since some of it may have been). The lease stops spending its credit
// before Redis may drop it (at the hold, measured from its last call that
// Redis answered, less a margin). While Redis is unavailable it serves
// what it holds, and no more: past that a call fails with ErrUnavailable,
// or, for a Limiter made WithFallback, is decided by the fallback as the
// Limiter's calls are, within the same bound. A call whose answer is lost
// is counted as having settled and given back what it sent, and granted
// nothing, which loses credit and never mints it.
//
// # Memory ordering
//
// A spend synchronizes as a TryForget of the pool does: after the top-up
// that made its credit available.
//
// A Lease must be made with Limiter.Lease; its methods are safe for
// concurrent use. It runs one goroutine, which Close ends.
type Lease struct {
	l        *Limiter
	key      string
	interval time.Duration
	max      int64 // the pool's maximum: the most a lease holds, and the largest request

	// pool holds the credit taken; it is replaced (and the old one closed)
	// when its credit expires.
	pool atomic.Pointer[atomicsem.Semaphore]
	// low is the pool limit below which a spend wakes the refill.
	low atomic.Int64
	// wanted is the credit that callers waiting on the pool, or on a
	// round trip, need.
	wanted atomic.Int64
	// missed is the credit TrySpend calls were refused since the refill
	// last looked: demand that the pool did not meet counts as demand, so
	// that a lease the fleet leaves short does not shrink its block for
	// it, and asks for its part.
	missed atomic.Int64
	kick   chan struct{} // capacity 1: wakes the refill
	quit   chan struct{} // closed by Close
	exited chan struct{} // closed when the refill returns

	// dry is when a short pool may next ask Redis (UnixNano): until then
	// Redis's last answer stands, that it had no credit left to grant (for
	// a random eighth to three eighths of an interval), or that it could
	// not be reached (for a sixteenth of an interval), and a TrySpend that
	// the pool cannot cover is answered from it without a round trip.
	dry    atomic.Int64
	dryErr atomic.Pointer[error] // the failure that set dry, nil if none

	mu       sync.Mutex
	closed   bool                             // guarded by mu
	started  uint64                           // round trips begun, guarded by mu
	finished uint64                           // round trips ended, guarded by mu
	round    chan struct{}                    // closed when a round trip ends, then replaced; guarded by mu
	lastErr  error                            // the last round trip's error, nil if it succeeded; guarded by mu
	aborts   map[*int]context.CancelCauseFunc // Spend calls waiting on the pool, cancelled by a failed round trip; guarded by mu

	calls, failures, local atomic.Int64
	reserved, block        atomic.Int64

	r refill // owned by the refill goroutine, then by Close
}

// refill is the state of a lease's refill goroutine.
type refill struct {
	// The pool's limit moves by the refill's raises and lowers and by the
	// spends; so the credit spent through it is raised − lowered − limit.
	raised, lowered int64
	used            int64     // the credit spent through the pool at the last look
	unsent          int64     // spent and not yet settled in Redis
	mine            int64     // the reservation in Redis, as the lease knows it
	epoch           int64     // the generation it is in
	valid           time.Time // the pool's credit may be spent until then (see expire)
	refresh         time.Time // renew by then, even with nothing to change
	cap             int64     // the largest block, from the fleet's reservations
	demand          float64   // credit spent or refused per second, smoothed
	window          int64     // credit spent or refused since looked
	boost           int64     // the least block while callers find the pool short
	looked, active  time.Time // the last measure of the demand, and when a spend was last seen made
	seen            time.Time // the last look
}

// Lease returns a lease on key: a local pool that spends key's credit from
// blocks reserved in Redis (see Lease). It sends nothing to Redis until
// the first spend. It returns an error for an invalid option, and for an
// interval above a quarter of the Limiter's hold. It is a run-time error
// if an option is nil.
func (l *Limiter) Lease(key string, opts ...LeaseOption) (*Lease, error) {
	l.valid("Lease")
	o := leaseOptions{interval: DefaultLeaseInterval}
	for _, opt := range opts {
		if opt == nil {
			panic("rediscredit: nil LeaseOption")
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.interval > l.hold/4 {
		return nil, fmt.Errorf("rediscredit: lease interval %v is above a quarter of the hold, %v", o.interval, l.hold)
	}
	le := &Lease{
		l:        l,
		key:      key,
		interval: o.interval,
		max:      min(l.burst, atomicsem.MaxPermits),
		kick:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		exited:   make(chan struct{}),
		round:    make(chan struct{}),
		aborts:   make(map[*int]context.CancelCauseFunc),
	}
	le.pool.Store(atomicsem.MustNew(0, le.max))
	le.r.cap = max(l.burst/2, 1)
	now := time.Now()
	le.r.looked, le.r.active = now, now
	go le.run()
	return le, nil
}

// Key returns the lease's key.
func (le *Lease) Key() string { return le.key }

// TrySpend spends n credits from the lease's pool if it holds them, with
// no round trip, and reports whether it did. If the pool is short, it
// waits for the lease's next round trip to Redis, which asks for n more,
// and tries once again: false then means that Redis had not the credit
// either (or that the pool serves Spend calls that came first). ctx bounds
// only that wait.
//
// TrySpend(ctx, 0) succeeds, spending nothing. It returns an error,
// spending nothing, for n < 0 (matching atomicsem.ErrInvalidPermits), n
// above the burst or atomicsem.MaxPermits (matching
// atomicsem.ErrExceedsMax), after Close (ErrLeaseClosed), and, when the
// pool is short, ctx.Err() if ctx was done, or an error matching
// ErrUnavailable if the round trip failed or did not end by ctx's
// deadline, unless the Limiter falls back, in which case the fallback
// decides. It is a run-time error if ctx is nil.
func (le *Lease) TrySpend(ctx context.Context, n int64) (bool, error) {
	if lim, ok := le.pool.Load().TryForget(n); ok && n > 0 {
		if lim < le.low.Load() {
			le.wake()
		}
		return true, nil
	}
	return le.trySpendSlow(ctx, n)
}

// trySpendSlow is TrySpend when the pool does not cover n, outlined so
// that the fast path can be inlined. It waits for round trips until the
// pool covers n, Redis says it has not the credit, or a round trip fails:
// a pool that other spends emptied again after a top-up is no answer.
func (le *Lease) trySpendSlow(ctx context.Context, n int64) (bool, error) {
	if err := le.check(ctx, n); err != nil || n == 0 {
		return err == nil, err
	}
	wctx, cancel := le.l.trip(ctx)
	defer cancel()
	le.wanted.Add(n)
	defer le.wanted.Add(-n)
	var err error
	for err == nil {
		if lim, ok := le.pool.Load().TryForget(n); ok {
			if lim < le.low.Load() {
				le.wake()
			}
			return true, nil
		}
		if time.Now().UnixNano() < le.dry.Load() {
			// Redis said a moment ago that it has nothing to grant, or
			// could not be reached: answer as it did.
			le.wake()
			p := le.dryErr.Load()
			if p == nil {
				le.missed.Add(n)
				return false, nil
			}
			err = *p
			break
		}
		// Wait for the next round trip, or for the refill to find the
		// pool covers the callers, and look again.
		if done, werr := le.waitRound(wctx, le.nextRound()); done {
			err = werr
		}
	}
	if lim, ok := le.pool.Load().TryForget(n); ok {
		if lim < le.low.Load() {
			le.wake()
		}
		return true, nil
	}
	if err = le.unavailable(ctx, err); le.l.local != nil && errors.Is(err, ErrUnavailable) {
		res, err := le.l.local.trySpend(le.l, le.key, n, err)
		if err == nil {
			le.local.Add(1)
		}
		return res.OK, err
	}
	return false, err
}

// Spend spends n credits from the lease's pool, waiting for them: in
// FIFO order with the lease's other Spend calls, while the lease takes
// credit from Redis for them. It returns nil once they are spent.
//
// Spend(ctx, 0) returns nil at once. Spend returns an error, spending
// nothing, for the inputs TrySpend refuses, after Close (ErrLeaseClosed),
// ctx.Err() if ctx is done first, and an error matching ErrUnavailable if
// a round trip fails while it waits, unless the Limiter falls back, in
// which case the fallback's Spend decides. It is a run-time error if ctx
// is nil.
func (le *Lease) Spend(ctx context.Context, n int64) error {
	if lim, ok := le.pool.Load().TryForget(n); ok && n > 0 {
		if lim < le.low.Load() {
			le.wake()
		}
		return nil
	}
	return le.spendSlow(ctx, n)
}

// spendSlow is Spend when the pool does not cover n at once.
func (le *Lease) spendSlow(ctx context.Context, n int64) error {
	if err := le.check(ctx, n); err != nil || n == 0 {
		return err
	}
	for {
		p := le.pool.Load()
		wctx, abort := context.WithCancelCause(ctx)
		id := new(int)
		le.mu.Lock()
		if le.closed {
			le.mu.Unlock()
			abort(nil)
			return ErrLeaseClosed
		}
		le.aborts[id] = abort
		le.mu.Unlock()
		le.wanted.Add(n)
		le.wake()
		tok, err := p.Acquire(wctx, n)
		le.wanted.Add(-n)
		le.mu.Lock()
		delete(le.aborts, id)
		le.mu.Unlock()
		cause := context.Cause(wctx)
		abort(nil)
		if err == nil {
			tok.Forget()
			if lim, _ := p.TryForget(0); lim < le.low.Load() {
				le.wake()
			}
			return nil
		}
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, atomicsem.ErrClosed):
			continue // the pool expired, or the lease closed: look again
		case errors.Is(cause, ErrUnavailable):
			if le.l.local != nil {
				_, err := le.l.local.spend(ctx, le.l, le.key, n, cause)
				if err == nil {
					le.local.Add(1)
				}
				return err
			}
			return cause
		}
		return err
	}
}

// check validates a request of n credits made with ctx.
func (le *Lease) check(ctx context.Context, n int64) error {
	if ctx == nil {
		panic("rediscredit: nil Context")
	}
	switch {
	case n < 0:
		return errs.Errorf(atomicsem.ErrInvalidPermits, "rediscredit: a request for %d credits", n)
	case n > le.max:
		return errs.Errorf(atomicsem.ErrExceedsMax, "rediscredit: %d credits exceed a lease's largest request, %d", n, le.max)
	}
	le.mu.Lock()
	closed := le.closed
	le.mu.Unlock()
	if closed {
		return ErrLeaseClosed
	}
	return ctx.Err()
}

// unavailable returns the error of a call whose round trip failed with
// err: ctx.Err() if ctx was cancelled, and otherwise err, matching
// ErrUnavailable, and context.DeadlineExceeded as well if the wait ended
// at ctx's deadline (or the fallback's earlier one).
func (le *Lease) unavailable(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) {
		return cerr
	}
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// wake wakes the refill, if it is not awake already.
func (le *Lease) wake() {
	select {
	case le.kick <- struct{}{}:
	default:
	}
}

// nextRound wakes the refill and returns the number of the first round
// trip that begins after the call.
func (le *Lease) nextRound() uint64 {
	le.mu.Lock()
	n := le.started + 1
	le.mu.Unlock()
	le.wake()
	return n
}

// waitRound waits until round trip n has ended, or the refill has looked
// at the pool and found it covers the callers that wait (it then wakes
// them without a round trip), and reports whether round trip n has ended
// and the error of the last one that has, nil if it succeeded; or ctx's
// error (or ErrLeaseClosed) and true if ctx ends (or the lease closes)
// first.
func (le *Lease) waitRound(ctx context.Context, n uint64) (bool, error) {
	le.mu.Lock()
	done, ch, err, closed := le.finished >= n, le.round, le.lastErr, le.closed
	le.mu.Unlock()
	switch {
	case done:
		return true, err
	case closed:
		return true, ErrLeaseClosed
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return true, ctx.Err()
	}
	le.mu.Lock()
	done, err = le.finished >= n, le.lastErr
	le.mu.Unlock()
	return done, err
}

// poke wakes the callers waiting for a round trip, without one: they look
// at the pool again.
func (le *Lease) poke() {
	le.mu.Lock()
	close(le.round)
	le.round = make(chan struct{})
	le.mu.Unlock()
}

// LeaseStats is a snapshot of a Lease.
type LeaseStats struct {
	// Balance is the credit in the pool, not yet spent.
	Balance int64
	// Reserved is the credit the lease holds reserved in Redis: its
	// balance, and what it spent since its last round trip.
	Reserved int64
	// Block is the block it tops its pool up to.
	Block int64
	// Calls counts its round trips to Redis, and Failures those that
	// failed.
	Calls, Failures int64
	// Local counts the calls the Limiter's fallback decided.
	Local int64
}

// Stats returns a snapshot of the lease; it sends nothing to Redis.
func (le *Lease) Stats() LeaseStats {
	st := le.pool.Load().Stats()
	return LeaseStats{
		Balance:  max(st.Available, 0),
		Reserved: le.reserved.Load(),
		Block:    le.block.Load(),
		Calls:    le.calls.Load(),
		Failures: le.failures.Load(),
		Local:    le.local.Load(),
	}
}

// Close ends the lease: it stops its goroutine, refuses spends from then
// on with ErrLeaseClosed, ends the Spend calls waiting, and, in one round
// trip bounded by ctx (and by a second), settles what was spent and gives
// back the rest. It returns that round trip's error (matching
// ErrUnavailable if Redis did not answer: the lease's credit then comes
// back when Redis drops it, within twice the hold), or nil. Closing a
// closed lease does nothing and returns nil. It is a run-time error if
// ctx is nil.
func (le *Lease) Close(ctx context.Context) error {
	if ctx == nil {
		panic("rediscredit: nil Context")
	}
	le.mu.Lock()
	if le.closed {
		le.mu.Unlock()
		return nil
	}
	le.closed = true
	le.mu.Unlock()
	close(le.quit)
	<-le.exited
	p := le.pool.Load()
	p.Close()
	// A Spend that had its permits before the Close spends them now: wait
	// for it, so that nothing is given back that is spent after.
	_ = p.WaitIdle(ctx)
	le.mu.Lock()
	close(le.round)
	le.round = make(chan struct{})
	le.mu.Unlock()
	s := &le.r
	lim, _ := p.TryForget(0)
	s.look(lim)
	// Credit still held by a Spend that the wait above gave up on is spent
	// too, after this.
	held := p.Held()
	s.unsent += held
	give := lim - held
	empty := atomicsem.MustNew(0, le.max)
	empty.Close()
	le.pool.Store(empty)
	if s.mine == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, leaseTrip)
	defer cancel()
	_, err := le.l.runLease(ctx, le.key, 0, s.unsent, give, s.mine, s.epoch)
	le.calls.Add(1)
	if err != nil {
		le.failures.Add(1)
		return err
	}
	s.mine, s.unsent = 0, 0
	le.reserved.Store(0)
	return nil
}

// run is the refill goroutine: it wakes when a spend leaves the pool low,
// a caller waits, or its timer fires, and makes a round trip when one is
// due (see step).
func (le *Lease) run() {
	defer close(le.exited)
	t := time.NewTimer(le.interval / 4)
	defer t.Stop()
	for {
		select {
		case <-le.kick:
		case <-t.C:
		case <-le.quit:
			return
		}
		t.Reset(le.step())
	}
}

// look brings the refill's count of credit spent up to date from the
// pool's limit, lim.
func (s *refill) look(lim int64) (spent int64) {
	used := s.raised - s.lowered - lim
	spent = used - s.used
	s.used = used
	s.unsent += spent
	return spent
}

// idleWait is how long the refill sleeps when it holds nothing and nobody
// waits: until a spend wakes it.
const idleWait = time.Hour

// step looks at the pool and Redis's last answer, makes the round trip
// that is due, if any, and returns how long to sleep until the next look.
func (le *Lease) step() time.Duration {
	s := &le.r
	now := time.Now()
	p := le.pool.Load()
	lim, _ := p.TryForget(0)
	spent := s.look(lim)

	// The demand: credit spent per second over the last stretch of at
	// least a sixteenth of an interval, following a rise at once and a
	// fall over about an interval.
	if spent > 0 {
		// The spend was made after the last look: counting the process
		// active from then gives its idle credit back an interval after
		// its last spend at the latest, not an interval after this look.
		s.active = s.seen
	}
	s.seen = now
	s.window += spent + le.missed.Swap(0)
	if dt := now.Sub(s.looked); dt >= le.interval/16 {
		rate := float64(s.window) / dt.Seconds()
		if rate > s.demand {
			s.demand = rate
		} else {
			s.demand += (rate - s.demand) * min(float64(dt)/float64(le.interval), 1)
		}
		s.looked, s.window = now, 0
	}

	// Credit past its validity may be dropped by Redis at any moment:
	// close the pool, so that nothing more is spent from it, and count
	// all of it as spent.
	if lim > 0 && !s.valid.IsZero() && !now.Before(s.valid) {
		le.expire(p)
		p = le.pool.Load()
		lim = 0
	}

	avail := lim - p.Held()
	need := le.wanted.Load() - avail
	// Until its demand is first measured (a sixteenth of an interval
	// after it starts), a pool that callers find short doubles its block
	// at each look, so that a lease that starts under load takes a few
	// round trips to reach its block, not one per spend.
	if need > 0 && s.demand == 0 {
		s.boost = min(max(2*s.boost, 1), s.cap)
	} else {
		s.boost = 0
	}
	block := min(max(int64(math.Ceil(s.demand*le.interval.Seconds())), s.boost, 1), s.cap, le.max)
	low := max(block/4, 1)
	le.block.Store(block)
	le.low.Store(low)
	active := now.Sub(s.active) < le.interval
	var want, give int64
	if (active && avail < low || need > 0) && now.UnixNano() >= le.dry.Load() {
		want = min(max(block-avail, 0)+max(need, 0), le.max-lim)
	}
	if need <= 0 && avail > 0 {
		switch {
		case !active:
			give = avail // unspent for an interval: all of it goes back
		case avail > 2*block:
			give = avail - block // demand fell
		}
	}
	// A lease that holds credit renews it within half of what is left of
	// its validity, and one that has gone idle settles what it spent, so
	// that no spent credit stays reserved.
	due := s.mine > 0 && (!now.Before(s.refresh) || !active && s.unsent > 0)
	if want == 0 && give == 0 && !due {
		if need <= 0 && le.wanted.Load() > 0 {
			// Callers wait for a round trip, and the pool covers them
			// already (a top-up ended after they looked).
			le.poke()
		}
		if d := time.Duration(le.dry.Load() - now.UnixNano()); d > 0 && need > 0 {
			return d
		}
		if s.mine == 0 && lim == 0 {
			return idleWait
		}
		return le.interval / 4
	}
	if give > 0 {
		if _, ok := p.TryForget(give); ok {
			s.lowered += give
		} else {
			give = 0
		}
	}
	return le.trip(p, want, give)
}

// trip makes one round trip: it settles the credit spent, gives back give,
// and asks for want.
func (le *Lease) trip(p *atomicsem.Semaphore, want, give int64) time.Duration {
	s := &le.r
	le.mu.Lock()
	le.started++
	le.mu.Unlock()

	sent := time.Now()
	deadline := sent.Add(leaseTrip)
	if s.valid.After(sent) && s.valid.Before(deadline) {
		// Back by the validity's end, so that an expired pool is closed
		// in time.
		deadline = s.valid
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	r, err := le.l.runLease(ctx, le.key, want, s.unsent, give, s.mine, s.epoch)
	cancel()
	le.calls.Add(1)
	var next time.Duration
	if err != nil {
		// The outcome is unknown: count the settle and the give-back as
		// made and the grant as not, which may lose credit and never mints
		// it.
		le.failures.Add(1)
		s.mine = max(s.mine-s.unsent-give, 0)
		s.unsent = 0
		next = le.interval / 4
		le.dryErr.Store(&err)
		le.dry.Store(time.Now().Add(le.interval / 16).UnixNano())
	} else {
		if expect := s.mine - s.unsent - give; r.kept < expect {
			// Redis no longer held part of the reservation (a restart
			// without persistence): take it out of the pool where it is
			// still there; credit already spent of it is charged to the
			// balance at the next call.
			lim, _ := p.TryForget(0)
			if lost := min(expect-r.kept, lim-p.Held()); lost > 0 {
				if _, ok := p.TryForget(lost); ok {
					s.lowered += lost
				}
			}
		}
		s.unsent = 0
		s.mine = r.kept + r.ok
		s.epoch = r.epoch
		if added := p.Refill(r.ok); added > 0 {
			s.raised += added
		}
		// Redis drops the generation after next at its end; the pool's
		// credit is good until then, less a margin for clocks that run
		// at different speeds, measured from when the call was sent.
		span := float64(le.l.hold.Microseconds())
		left := time.Duration((float64(r.epoch+2)*span - float64(r.nowMicro)) * float64(time.Microsecond))
		s.valid = sent.Add(left - left/32)
		s.refresh = sent.Add(left / 2)
		s.cap = max((le.l.burst-(r.held-s.mine))/2, 1)
		next = le.interval / 4
		le.dryErr.Store(nil)
		le.dry.Store(0)
		if want > 0 && r.avail <= 0 {
			// Redis has nothing left: the fleet wants the whole rate, or
			// more. Whether this lease got all it asked for or not, it
			// asks again about a quarter of an interval on (an interval if
			// accrual takes that long to cover the rest), so that a lease
			// makes about four round trips per interval however great the
			// demand; until then a short pool is answered from this
			// answer. The delay is drawn at random between an eighth and
			// three eighths of an interval, so that the leases take turns
			// in no fixed order, each finding what accrued since the one
			// before it: a lease that got its block does not ask again
			// sooner than one that did not.
			next = le.interval/8 + rand.N(le.interval/4)
			if r.wait > le.interval {
				next = le.interval
			}
			le.dry.Store(time.Now().Add(next).UnixNano())
		}
	}
	le.reserved.Store(s.mine)
	le.ended(err)
	return next
}

// ended records the end of a round trip that failed with err (nil if it
// succeeded), wakes the callers waiting for one, and aborts the Spend
// calls waiting on the pool if it failed.
func (le *Lease) ended(err error) {
	le.mu.Lock()
	le.finished++
	le.lastErr = err
	close(le.round)
	le.round = make(chan struct{})
	var aborts []context.CancelCauseFunc
	if err != nil {
		for _, a := range le.aborts {
			aborts = append(aborts, a)
		}
	}
	le.mu.Unlock()
	for _, a := range aborts {
		a(err)
	}
}

// expire closes the pool p, whose credit may have been dropped by Redis,
// counts what it held as spent, and puts an empty pool in its place.
func (le *Lease) expire(p *atomicsem.Semaphore) {
	s := &le.r
	p.Close()
	lim, _ := p.TryForget(0)
	s.look(lim)
	s.unsent += lim // dropped unspent: reported as spent, never given back
	s.raised, s.lowered, s.used = 0, 0, 0
	s.valid = time.Time{}
	le.pool.Store(atomicsem.MustNew(0, le.max))
}
