// Package rediscredit keeps credit buckets in Redis, so that every process
// of a fleet spends from the same bucket: at most r requests a second to a
// partner API per customer, with bursts of b, across all the servers that
// call it.
//
// A Limiter holds no state of its own: each key names one bucket, kept in
// one Redis key, that accrues rate credits per second up to burst, as a
// credit.Bucket does, and keeps the same laws: after t from empty the
// balance is min(burst, ⌊rate·t⌋) with the fraction of a credit kept
// between calls, time spent full is not banked, and nothing is minted by
// races between processes. Time is the Redis server's clock, read by the
// script that every call runs, so the clients' clocks never matter.
//
// Every call is one round trip: one server-side script on one key, so
// calls are atomic and work on Redis Cluster (keys that must live in one
// slot share a hash tag, as in "{tenant42}:search"; a bucket needs none).
// A full bucket with nothing reserved is deleted, and any other expires
// when it would be full, so Redis holds only the buckets in use.
//
// TrySpend takes credit now or says how long until it could; Spend waits
// for it, claiming the credit due next, so that waiters across the fleet
// are served in the order they claimed it and accrual does not stop while
// any of them waits. TryReserve holds credit until the Reservation is settled, for
// work whose cost is known only afterwards.
//
// # Leases
//
// A call per spend costs a round trip, and a fleet that spends hundreds of
// thousands of credits a second would need as many script calls. A
// process that spends a key's credit often leases it instead
// (Limiter.Lease): its Lease takes blocks of the key's credit, one round
// trip each, sized to about what the process spends in an interval, and
// spends from them in-process at the cost of an atomic operation. What a
// lease holds is reserved in Redis, where it counts against the burst, so
// the laws above hold for the whole fleet exactly, whatever the blocks;
// what changes is the order in which processes are served. Credit a
// lease does not spend goes back within about an interval, and the credit
// of a process that dies comes back within two holds (see Lease).
//
// # Faults
//
// A call is one round trip, and the network or the server may fail it in
// any way: refuse or reset the connection, before or after Redis applied
// the request; delay what it carries, or swallow it (a black hole); stop
// answering; restart, or not be ready. Under each of these:
//
//   - A call ends by its context's deadline (but for a Spend that gives
//     back a claim, which takes one more round trip of at most a second).
//     A round trip that fails for want of Redis returns an error matching
//     ErrUnavailable, and one that the deadline ended matches
//     context.DeadlineExceeded as well; a cancelled context returns
//     ctx.Err(), and an error reply from the server (the key holds
//     something else) comes back as it is.
//   - No request is sent twice. A request whose answer was lost may have
//     been applied: its credit is then spent in Redis and granted to no
//     one, which loses credit and never mints it. In every window of
//     length w of Redis's clock, Redis grants a key at most
//     burst + ⌊rate·w⌋, across the fleet, whatever the faults.
//   - A server that restarts without persistence has lost its buckets, and
//     each comes back full: up to one more burst per key.
//
// What a call does when Redis is unavailable is chosen per Limiter. By
// default it fails closed: it returns the error, and the caller refuses
// the request. A Limiter made WithFallback fails open: the call is decided
// by a bucket of its key in this process, at a share of the rate and the
// burst, before the call's deadline, and Result.Local says so. A key's
// local bucket keeps its state across outages, so the fail-open is bounded
// however often Redis fails: in any window of length w, a key is granted
// at most burst + ⌊rate·w⌋ by Redis plus, by each process that falls back,
// max(⌊share·burst⌋, 1) + ⌊share·rate·w⌋ by its fallback. The fallback
// keeps the buckets of at most DefaultFallbackMaxKeys keys (see
// WithFallbackMaxKeys), about 160 bytes each.
//
// # Client settings
//
// The client must end a call at its context's deadline: for go-redis's
// *redis.Client, *redis.ClusterClient and *redis.Ring, ContextTimeoutEnabled
// set, and no ReadTimeout or WriteTimeout of -2. Without them a call to a
// server that stops answering waits for the client's ReadTimeout (5 s by
// default) whatever its deadline, so New refuses such a client with an
// error matching ErrIgnoresDeadlines. Through these clients the Limiter
// sends its commands with retries off, so that no request is applied
// twice, and MaxRetries does not apply to them. The other settings are
// the caller's: against a server that refuses connections, go-redis dials
// DialerRetries times (5 by default, 100 ms apart) within the call's
// deadline before the call fails (once PoolSize dials have failed, it
// fails calls at once until a dial succeeds); with DialerRetries: 1 such
// a call fails, or falls back, at once.
//
//	rdb := redis.NewClient(&redis.Options{
//		Addr:                  "redis:6379",
//		ContextTimeoutEnabled: true, // required: a call ends at its deadline
//		DialerRetries:         1,    // a refused connection fails the call at once
//	})
//
// A client of another type (a wrapper that implements redis.Scripter) is
// taken as it is: for the promises above, it must end a call at its
// context's deadline, and not retry it (MaxRetries: -1).
//
// See docs/fleet.md for the trade-offs, the costs and how it is tested.
package rediscredit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credit"
	"github.com/atomicsem/atomicsem/internal/errs"
)

// MaxBurst is the largest burst a Limiter takes: the script's arithmetic
// on the balance is exact in float64 up to it.
const MaxBurst = 1 << 40

var (
	// ErrUnavailable is returned (wrapped, with the cause) when Redis does
	// not answer: no connection, a reset, a timeout, or a server not ready
	// to serve. When the call's deadline ended the round trip, the error
	// matches context.DeadlineExceeded too.
	ErrUnavailable = errors.New("rediscredit: redis unavailable")
	// ErrIgnoresDeadlines is returned (wrapped, with the option to set) by
	// New for a client whose options say it would not end a call at its
	// context's deadline.
	ErrIgnoresDeadlines = errors.New("rediscredit: the client does not end a call at its context's deadline")
)

// A Limiter spends credit from buckets kept in Redis, one per key. Its
// methods are safe for concurrent use, and any number of Limiters, in any
// number of processes, may share the buckets.
//
// A Limiter must be made with New: the zero value is not usable, and its
// methods panic.
type Limiter struct {
	client redis.Scripter
	proc   processor // client, if it runs any command; nil: through Scripter
	rate   atomic.Pointer[rate]
	burst  int64
	hold   time.Duration
	local  *fallback // nil: fail closed
	// localKeys is WithFallbackMaxKeys's cap, 0 if not given.
	localKeys int64
}

// An Option configures a Limiter in New.
type Option func(*Limiter) error

// WithHold sets how long credit reserved by TryReserve stays reserved
// without a call to its key; after that, the key may expire, and the
// reservation counts as given back (an unsettled Forget then spends from
// the balance). The default is one minute.
func WithHold(d time.Duration) Option {
	return func(l *Limiter) error {
		if d < time.Millisecond {
			return fmt.Errorf("rediscredit: hold %v is under a millisecond", d)
		}
		l.hold = d
		return nil
	}
}

// New returns a Limiter of buckets that accrue rate credits per second up
// to burst, kept in Redis through client (a *redis.Client, a
// *redis.ClusterClient or a *redis.Ring). A bucket not yet in Redis is
// full. rate may be 0 (a bucket only spends what it holds) or math.Inf(1)
// (no limit: a bucket is full at every call, less what is reserved).
//
// New returns an error matching credit.ErrInvalidRate for a negative or
// NaN rate, credit.ErrInvalidBurst for a burst outside [1, MaxBurst] or one
// that takes credit.MaxFill or longer to accrue at the rate (as credit.New
// does), the option's error for an invalid option (and for
// WithFallbackMaxKeys without WithFallback), and ErrIgnoresDeadlines for a
// go-redis client whose options would not end a call at its context's
// deadline (see the package documentation). It sends nothing to Redis. It
// is a run-time error if client is nil (a nil interface, or a nil
// *redis.Client or other pointer in it) or an option is nil.
func New(client redis.Scripter, rate float64, burst int64, opts ...Option) (*Limiter, error) {
	if isNil(client) {
		panic("rediscredit: nil client")
	}
	if burst < 1 || burst > MaxBurst {
		return nil, errs.Errorf(credit.ErrInvalidBurst, "rediscredit: invalid burst: %d is outside [1, %d]", burst, int64(MaxBurst))
	}
	if err := checkRate(rate, burst, credit.ErrInvalidBurst); err != nil {
		return nil, err
	}
	l := &Limiter{client: client, burst: burst, hold: time.Minute}
	l.proc, _ = client.(processor)
	for _, opt := range opts {
		if opt == nil {
			panic("rediscredit: nil Option")
		}
		if err := opt(l); err != nil {
			return nil, err
		}
	}
	if err := l.local.init(l.localKeys); err != nil {
		return nil, err
	}
	if err := checkClient(client); err != nil {
		return nil, err
	}
	l.rate.Store(l.newRate(rate))
	return l, nil
}

// isNil reports whether c is nil or holds a nil pointer, as a
// (*redis.Client)(nil) passed for the interface does.
func isNil(c redis.Scripter) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Func, reflect.Slice, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// checkRate returns an error matching credit.ErrInvalidRate for a negative
// or NaN rate, and fill, wrapped, if burst takes credit.MaxFill or longer
// to accrue at the rate: credit's rule, so that the same configuration is
// refused by both. A burst within credit's range is checked by credit
// itself; a larger one by the same rule in floating point, where a rate
// below one credit in 63 years accrues nothing in credit and so has no
// fill time.
func checkRate(rate float64, burst int64, fill error) error {
	if !(rate >= 0) {
		return errs.Errorf(credit.ErrInvalidRate, "rediscredit: invalid rate: %v credits per second", rate)
	}
	if burst <= atomicsem.MaxPermits {
		if _, err := credit.NewConfig(rate, burst); err != nil {
			if errors.Is(err, credit.ErrInvalidBurst) && fill != credit.ErrInvalidBurst {
				err = errs.Errorf(fill, "%s", strings.Replace(err.Error(), "invalid burst", "invalid rate", 1))
			}
			return errs.Reprefix("rediscredit", err)
		}
		return nil
	}
	const zeroBelow = 1 / (2e9) // credit's: below one credit in 2·10⁹ s
	if rate >= zeroBelow && !math.IsInf(rate, 1) && float64(burst)/rate*1e9 >= float64(credit.MaxFill) {
		return errs.Errorf(fill, "rediscredit: a burst of %d takes %.3g years to accrue at %v credits per second, more than credit.MaxFill",
			burst, float64(burst)/rate/(365.25*24*3600), rate)
	}
	return nil
}

// rate is a rate as a number and as the script's first argument: the rate,
// the burst and the hold in milliseconds, packed as the script reads them
// (three little-endian float64s) and boxed once, so that a call neither
// formats nor allocates them and the script parses no decimal.
type rate struct {
	f      float64
	params any
}

func (l *Limiter) newRate(f float64) *rate {
	b := make([]byte, 0, 24)
	for _, x := range []float64{f, float64(l.burst), float64(l.hold.Milliseconds())} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return &rate{f, string(b)}
}

// Rate returns the rate, in credits per second, as last set.
func (l *Limiter) Rate() float64 { l.valid("Rate"); return l.rate.Load().f }

// Burst returns the burst.
func (l *Limiter) Burst() int64 { l.valid("Burst"); return l.burst }

// valid panics, naming op, if l is nil or the zero Limiter: caller bugs
// that would otherwise fail as a nil dereference far from the call.
func (l *Limiter) valid(op string) {
	if l == nil {
		panic("rediscredit: " + op + " on a nil *Limiter")
	}
	if l.client == nil {
		panic("rediscredit: " + op + " on a zero Limiter; make one with New")
	}
}

// SetRate changes the rate of this Limiter's buckets. Each key takes the new
// rate at its next call through this Limiter, with its accrual up to that
// call settled at the rate it had and the fraction of a credit carried
// over, so a change neither mints nor loses credit. Processes that share
// keys should set the same rate: a key accrues at the rate of the last
// Limiter that called it.
//
// SetRate returns an error matching credit.ErrInvalidRate for a negative
// or NaN rate, and for one at which the burst takes credit.MaxFill or
// longer to accrue, changing nothing. It sends nothing to Redis.
func (l *Limiter) SetRate(rate float64) error {
	l.valid("SetRate")
	if err := checkRate(rate, l.burst, credit.ErrInvalidRate); err != nil {
		return err
	}
	l.rate.Store(l.newRate(rate))
	return nil
}

// Result is the outcome of a call.
type Result struct {
	// OK reports whether the credit was spent (or reserved).
	OK bool
	// Wait is, when OK is false, how long until accrual alone covers the
	// request, or -1 if it never will (a rate of 0, or credit it needs
	// held by reservations). It is a forecast: other callers may take the
	// credit first. A Local result leaves it 0.
	Wait time.Duration
	// Balance is the credit available after the call; negative while Spend
	// calls wait for credit they have claimed.
	Balance int64
	// Reserved is the credit held by reservations after the call.
	Reserved int64
	// Time is the server's clock when it decided; for Spend, the moment
	// the credit it spent had accrued.
	Time time.Time
	// Local reports that Redis was unavailable and the fallback bucket of
	// this process decided (see WithFallback); Time is then this process's
	// clock.
	Local bool
}

func (r reply) result() Result {
	return Result{OK: r.ok != 0, Wait: r.wait, Balance: r.avail, Reserved: r.held, Time: r.now}
}

// check validates a request for n credits, before any round trip.
func (l *Limiter) check(op string, ctx context.Context, n int64) error {
	l.valid(op)
	if ctx == nil {
		panic("rediscredit: nil Context")
	}
	switch {
	case n < 0:
		return errs.Errorf(atomicsem.ErrInvalidPermits, "rediscredit: a request for %d credits", n)
	case n > l.burst:
		return errs.Errorf(atomicsem.ErrExceedsMax, "rediscredit: %d credits exceed the burst of %d", n, l.burst)
	}
	return ctx.Err()
}

// nothing answers a request for no credit: it succeeds, spending nothing,
// with the bucket's state in one round trip (Stats's), or the fallback's
// if Redis is unavailable and the Limiter falls back.
func (l *Limiter) nothing(ctx context.Context, key string) (Result, error) {
	tctx, cancel := l.trip(ctx)
	r, err := l.run(tctx, opStats, key, 0, 0, -1)
	cancel()
	if err != nil {
		if l.local != nil && errors.Is(err, ErrUnavailable) {
			return l.local.trySpend(l, key, 0, err)
		}
		return Result{}, err
	}
	res := r.result()
	res.OK = true
	return res, nil
}

// TrySpend takes n credits from key's bucket for good if its balance covers
// them now: one round trip. The Result says whether it did and, if not,
// how long until accrual would cover them.
//
// TrySpend(ctx, key, 0) succeeds, spending nothing, and reports the
// bucket's state. Any key names a bucket, the empty key included.
//
// TrySpend returns an error, spending nothing, before any round trip for
// n < 0 (matching atomicsem.ErrInvalidPermits) or n above the burst
// (matching atomicsem.ErrExceedsMax), and for a done ctx (ctx.Err());
// after one, it returns an error matching ErrUnavailable if Redis did not
// answer in time (and context.DeadlineExceeded too if ctx's deadline ended
// the round trip), unless the Limiter falls back, ctx.Err() if ctx was
// cancelled,
// and Redis's error reply if the key holds something else. It is a
// run-time error if ctx is nil.
func (l *Limiter) TrySpend(ctx context.Context, key string, n int64) (Result, error) {
	if err := l.check("TrySpend", ctx, n); err != nil {
		return Result{}, err
	}
	if n == 0 {
		return l.nothing(ctx, key)
	}
	tctx, cancel := l.trip(ctx)
	r, err := l.run(tctx, opSpend, key, n, 0, -1)
	cancel()
	if err != nil {
		if l.local != nil && errors.Is(err, ErrUnavailable) {
			return l.local.trySpend(l, key, n, err)
		}
		return Result{}, err
	}
	return r.result(), nil
}

// Spend takes n credits from key's bucket for good, waiting until they
// have accrued, and returns once they have; Result.Time is when they
// accrued, on the server's clock. A Spend on a short balance claims the
// credit due next (one round trip) and sleeps until it is due: claims are
// served in the order they reach Redis, across the fleet, and TrySpend
// does not take credit that a claim waits for.
//
// Spend claims nothing that accrues after ctx's deadline; it waits until
// the deadline instead, looking again as credit is forecast, and returns
// ctx.Err(). A Spend whose ctx is done while it sleeps gives its claim
// back (one more round trip, with a second of its own to run) and returns
// ctx.Err(). While reservations hold the credit it needs, Spend looks
// again at intervals of one period of the rate (between a millisecond and
// a second).
//
// Spend fails as TrySpend does, spending nothing; Spend(ctx, key, 0)
// returns at once as TrySpend(ctx, key, 0) does.
func (l *Limiter) Spend(ctx context.Context, key string, n int64) (Result, error) {
	if err := l.check("Spend", ctx, n); err != nil {
		return Result{}, err
	}
	if n == 0 {
		return l.nothing(ctx, key)
	}
	for {
		limit := int64(-1)
		if dl, ok := ctx.Deadline(); ok {
			limit = max(time.Until(dl).Microseconds(), 0)
		}
		tctx, cancel := l.trip(ctx)
		r, err := l.run(tctx, opClaim, key, n, 0, limit)
		cancel()
		if err != nil {
			if l.local != nil && errors.Is(err, ErrUnavailable) {
				return l.local.spend(ctx, l, key, n, err)
			}
			return Result{}, err
		}
		res := r.result()
		switch r.ok {
		case 1:
			return res, nil
		case 2:
			if err := sleep(ctx, r.wait); err != nil {
				l.unclaim(ctx, key, n)
				return Result{}, err
			}
			res.Time = res.Time.Add(r.wait)
			res.Wait = 0
			return res, nil
		}
		wait := r.wait
		if wait < 0 {
			wait = l.period()
		}
		if err := sleep(ctx, wait); err != nil {
			return Result{}, err
		}
	}
}

// unclaim gives back credit claimed by a Spend that gave up. Its error is
// dropped: a claim that cannot be given back is credit lost, never minted.
func (l *Limiter) unclaim(ctx context.Context, key string, n int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_, _ = l.run(ctx, opUnclaim, key, n, 0, -1)
}

// period returns one period of the rate, between a millisecond and a
// second: how often a Spend that accrual alone cannot serve looks again.
func (l *Limiter) period() time.Duration {
	r := l.Rate()
	if r <= 0 {
		return time.Second
	}
	return min(max(time.Duration(float64(time.Second)/r), time.Millisecond), time.Second)
}

// sleep waits for d or until ctx is done, returning ctx.Err() then.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats mints the accrual due on key's bucket and returns its state, in one
// round trip; Result.OK is true. It fails as TrySpend does, but takes no n.
func (l *Limiter) Stats(ctx context.Context, key string) (Result, error) {
	if err := l.check("Stats", ctx, 0); err != nil {
		return Result{}, err
	}
	r, err := l.run(ctx, opStats, key, 0, 0, -1)
	if err != nil {
		return Result{}, err
	}
	res := r.result()
	res.OK = true
	return res, nil
}
