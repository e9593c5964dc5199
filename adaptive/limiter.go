package adaptive

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/overload"
)

var (
	// ErrInvalidLimits is returned (wrapped, with the numbers) by New when
	// the bounds are not 1 ≤ min ≤ initial ≤ max ≤ atomicsem.MaxPermits,
	// or the latency bound of WithLatencyBound is negative.
	ErrInvalidLimits = errors.New("adaptive: invalid limits")
	// ErrInvalidController is returned (wrapped, with the reason) by New
	// and by the controllers' Validate methods when a controller has a
	// setting out of its range. New also wraps it around the error of a
	// caller's controller whose Validate method fails.
	ErrInvalidController = errors.New("adaptive: invalid controller setting")
	// ErrObserved is returned by Limiter.Observe when the limiter has an
	// observer already.
	ErrObserved = errors.New("adaptive: the limiter has an observer already")
)

// Default bounds of a Limiter, as in Netflix's concurrency-limits.
const (
	DefaultMinLimit     = 1
	DefaultInitialLimit = 20
	DefaultMaxLimit     = 1000
)

// Limiter is a concurrency limit that a Controller moves at run time,
// enforced by an atomicsem.Semaphore.
//
// Each request takes a Permit (Acquire waits for one, TryAcquire sheds the
// request when none is free) and ends it with Succeeded, Dropped, Ignored or
// Inconclusive.
// Succeeded and Dropped feed the round-trip time, the number of requests in
// flight and the outcome to the controller, whose answer becomes the
// semaphore's limit through SetLimit: lowering it never revokes a permit
// already out, so requests in flight always run to completion, and the
// semaphore admits nobody while the permits out are at or above the limit
// in force.
//
// The limit stays within the bounds given by WithLimits (by default
// DefaultMinLimit, DefaultMaxLimit, starting at DefaultInitialLimit); the
// maximum is the semaphore's ceiling for the Limiter's life.
//
// A Limiter is safe for concurrent use. Its zero value is not usable;
// create one with New.
//
// # Memory ordering
//
// The end of a Permit (Succeeded, Dropped or Ignored) synchronizes before the
// return of the Acquire or TryAcquire that obtains the freed slot, as
// atomicsem's Release does.
type Limiter struct {
	sem      *atomicsem.Semaphore
	gate     *overload.Gate // WithGate's, in place of sem; nil without it
	rejected atomic.Uint64
	// turnedAway counts the requests the limit turned away: TryAcquire
	// calls that found no free slot and Acquire calls that had to wait.
	// A Permit keeps its value at admission, so that its end can tell
	// whether the limit bounded the requests in flight meanwhile.
	turnedAway atomic.Uint64
	min, max   float64
	bound      time.Duration // WithLatencyBound's; 0 for the controller's
	// epoch is when the limiter was made. Permits keep their start as the
	// time since epoch, which time.Since reads from the monotonic clock
	// alone: time.Now would read the wall clock too, and on a request's
	// fast path the two clock reads cost more than the rest together.
	epoch time.Time
	// obs is the function Observe registered, or nil; every permit's end
	// loads it.
	obs atomic.Pointer[observer]

	mu      sync.Mutex
	ctrl    Controller    // guarded by mu
	limit   float64       // the controller's limit; guarded by mu
	set     int64         // the limit last given to sem; guarded by mu
	lastRTT time.Duration // of the last Succeeded request; guarded by mu
	success uint64        // guarded by mu
	dropped uint64        // guarded by mu
	ignored uint64        // guarded by mu
}

// An Option configures a Limiter in New.
type Option func(*config)

type config struct {
	min, initial, max int64
	bound             time.Duration
	semOpts           []atomicsem.Option
	gate              *overload.Gate
}

// WithLimits sets where the limit starts, initial, and the bounds it
// stays within, [min, max]: the starting value first, as in
// atomicsem.New(initial, max). New checks 1 ≤ min ≤ initial ≤ max ≤
// atomicsem.MaxPermits.
func WithLimits(initial, min, max int64) Option {
	return func(c *config) { c.initial, c.min, c.max = initial, min, max }
}

// WithLatencyBound sets the latency bound past which a request that ends
// Inconclusive (its client went away, its deadline passed, the server
// failed) counts as Dropped rather than Ignored: a request that lasted that
// long waited where the service keeps none that long. By default, or with
// a d of 0, the controller sets it from its measure of the service's
// latency, through a method LatencyBound() time.Duration if it has one, as
// the controllers of this package do (about four times the latency of a
// request that does not queue); without a bound, an Inconclusive request
// counts as Ignored. A negative d is an error, ErrInvalidLimits.
func WithLatencyBound(d time.Duration) Option {
	return func(c *config) { c.bound = d }
}

// WithSemaphoreOptions passes options to the semaphore the Limiter builds,
// atomicsem.WithBarging for one: waiters of Acquire are served in FIFO order
// unless told otherwise. It is a run-time error to pass a nil
// atomicsem.Option; the panic message begins "adaptive: ".
func WithSemaphoreOptions(opts ...atomicsem.Option) Option {
	for _, opt := range opts {
		if opt == nil {
			panic("adaptive: WithSemaphoreOptions: nil atomicsem.Option")
		}
	}
	return func(c *config) { c.semOpts = append(c.semOpts, opts...) }
}

// New returns a Limiter whose limit ctrl moves. A nil ctrl means a
// Gradient2 with its default settings.
//
// New returns ErrInvalidLimits for bounds out of order and
// ErrInvalidController for a controller with a setting out of its range:
// New calls the controller's Validate method if it has one, as the
// controllers of this package do, and checks Vegas's Alpha and Beta
// against the bounds. It is a run-time error to pass a nil pointer as ctrl
// (a typed nil, such as (*AIMD)(nil)) or a nil Option; the panic message
// begins "adaptive: ".
func New(ctrl Controller, opts ...Option) (*Limiter, error) {
	cfg := config{min: DefaultMinLimit, initial: DefaultInitialLimit, max: DefaultMaxLimit}
	for _, opt := range opts {
		if opt == nil {
			panic("adaptive: New: nil Option")
		}
		opt(&cfg)
	}
	if cfg.min < 1 || cfg.min > cfg.initial || cfg.initial > cfg.max || cfg.max > atomicsem.MaxPermits {
		return nil, fmt.Errorf("%w: min %d, initial %d, max %d needs 1 ≤ min ≤ initial ≤ max ≤ %d",
			ErrInvalidLimits, cfg.min, cfg.initial, cfg.max, atomicsem.MaxPermits)
	}
	if cfg.bound < 0 {
		return nil, fmt.Errorf("%w: latency bound %v is negative", ErrInvalidLimits, cfg.bound)
	}
	if ctrl == nil {
		ctrl = &Gradient2{}
	}
	if isNilPointer(ctrl) {
		panic(fmt.Sprintf("adaptive: New: ctrl is a nil %T", ctrl))
	}
	if c, ok := ctrl.(validator); ok {
		if err := c.Validate(); err != nil {
			if !errors.Is(err, ErrInvalidController) {
				err = fmt.Errorf("%w: %w", ErrInvalidController, err)
			}
			return nil, err
		}
	}
	if c, ok := ctrl.(boundsValidator); ok {
		if err := c.validateWithin(float64(cfg.min), float64(cfg.max)); err != nil {
			return nil, err
		}
	}
	if cfg.gate != nil {
		return newGated(ctrl, cfg)
	}
	sem, err := atomicsem.New(cfg.initial, cfg.max, cfg.semOpts...)
	if err != nil {
		return nil, err // unreachable: the bounds were checked above
	}
	return newLimiter(ctrl, cfg, sem, nil), nil
}

// newLimiter returns a Limiter of ctrl that enforces its limit with sem or,
// made WithGate, with gate, the other being nil, starting at cfg's initial
// limit.
func newLimiter(ctrl Controller, cfg config, sem *atomicsem.Semaphore, gate *overload.Gate) *Limiter {
	return &Limiter{
		sem:   sem,
		gate:  gate,
		epoch: time.Now(),
		min:   float64(cfg.min),
		max:   float64(cfg.max),
		ctrl:  ctrl,
		limit: float64(cfg.initial),
		set:   cfg.initial,
		bound: cfg.bound,
	}
}

// Acquire waits for a free slot under the current limit and makes p a
// live Permit for it, which the caller must end with Succeeded, Dropped or
// Ignored. Waiters are admitted in FIFO order (unless WithSemaphoreOptions
// said otherwise), as requests end or the limit rises. The caller provides
// the Permit, so that acquiring allocates nothing and the token inside it
// is never copied.
//
// On failure Acquire leaves p as it was and the limiter unchanged, and
// returns ctx.Err() if ctx is done first, atomicsem.ErrClosed after Close.
// It is a run-time error to pass a Permit that is live, a nil Permit, a nil
// ctx, or to call it on a nil Limiter; the panic message begins
// "adaptive: " and names the argument.
func (l *Limiter) Acquire(ctx context.Context, p *Permit) error {
	if ctx == nil {
		panic("adaptive: Limiter.Acquire: nil ctx")
	}
	l.mustExist()
	p.mustBeFree()
	if err := ctx.Err(); err != nil {
		return err // as the semaphore's Acquire does for a ctx done before the call
	}
	if l.gate != nil {
		return l.acquireGate(ctx, p)
	}
	var ok bool
	if p.tok, ok = l.sem.TryAcquire(1); !ok {
		return l.acquireSlow(ctx, p)
	}
	l.admit(p)
	return nil
}

// acquireSlow waits for a slot, counting the wait as a request the limit
// turned away. It is outlined so that Acquire's path without a wait stays
// small.
func (l *Limiter) acquireSlow(ctx context.Context, p *Permit) error {
	l.turnedAway.Add(1)
	var err error
	if p.tok, err = l.sem.Acquire(ctx, 1); err != nil {
		return err
	}
	l.admit(p)
	return nil
}

// TryAcquire takes a free slot under the current limit without waiting,
// makes p a live Permit for it and reports whether it did. On success the
// caller must end p with Succeeded, Dropped or Ignored; on failure, the signal
// to shed the request, p is left as it was. It fails while Acquire calls
// wait, so as not to overtake them, and after Close. It is a run-time error
// to pass a Permit that is live or nil, or to call it on a nil Limiter.
func (l *Limiter) TryAcquire(p *Permit) bool {
	l.mustExist()
	p.mustBeFree()
	if l.gate != nil {
		return l.tryAcquireGate(l.gate.Classes()-1, p)
	}
	var ok bool
	if p.tok, ok = l.sem.TryAcquire(1); !ok {
		l.rejected.Add(1)
		l.turnedAway.Add(1)
		return false
	}
	l.admit(p)
	return true
}

// mustExist panics if l is nil, naming the receiver, where a nil Limiter
// would otherwise fail with a bare nil dereference.
func (l *Limiter) mustExist() {
	if l == nil {
		panic("adaptive: nil *Limiter")
	}
}

// admit fills in a permit whose token has just been acquired. Every
// permit holds one of the semaphore's permits from its admission to its
// end, so the semaphore's held count is the requests in flight: reading it
// costs a load of a word the admission has just written, where a counter
// of its own would cost every request two more atomic writes to a shared
// cache line.
func (l *Limiter) admit(p *Permit) {
	p.l = l
	if l.gate == nil {
		p.inFlight = l.sem.Held()
	} else {
		p.inFlight = l.gate.Held()
	}
	p.turnedAway = l.turnedAway.Load()
	p.start = time.Since(l.epoch)
}

// record feeds one sample to the controller and moves the semaphore's limit
// to its integer part when that changes. The controller runs under mu, so
// that its state and the limit change in the order of the samples; the
// SetLimit calls are made under mu too, so that they reach the semaphore in
// the order the controller decided them. The controller is the caller's
// code: mu is released in a defer, so that a Next that panics leaves the
// limit where it was and the lock free, and the panic goes on to the
// goroutine that ended the permit, whose slot is already free.
func (l *Limiter) record(s Sample) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.Dropped {
		l.dropped++
	} else {
		l.success++
		l.lastRTT = s.RTT
	}
	next := l.ctrl.Next(l.limit, s)
	if next == next { // not NaN
		l.limit = max(l.min, min(l.max, next))
	}
	if n := int64(l.limit); n != l.set {
		if l.setLimit(n) == nil { // fails only once closed
			l.set = n
		}
	}
}

// inconclusive records a request that ended Inconclusive: as a drop if it
// lasted longer than the latency bound, else as ignored. It returns the
// outcome it was counted as.
func (l *Limiter) inconclusive(s Sample) Outcome {
	if bound := l.latencyBound(); bound <= 0 || s.RTT <= bound {
		l.ignore()
		return Ignored
	}
	s.Dropped = true
	l.record(s)
	return Dropped
}

// latencyBound returns the bound WithLatencyBound set, or else the
// controller's, read under mu as the controller's state is; mu is released
// in a defer, so that a LatencyBound that panics leaves it unlocked.
func (l *Limiter) latencyBound() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bound != 0 {
		return l.bound
	}
	if b, ok := l.ctrl.(bounder); ok {
		return b.LatencyBound()
	}
	return 0
}

// ignore counts a request that ended in Ignored.
func (l *Limiter) ignore() {
	l.mu.Lock()
	l.ignored++
	l.mu.Unlock()
}

// isNilPointer reports whether ctrl holds a nil pointer, on which Next
// would fail at the first request instead of at New.
func isNilPointer(ctrl Controller) bool {
	v := reflect.ValueOf(ctrl)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// observer boxes the function Observe registered, so that an atomic
// pointer holds it.
type observer struct {
	f func(Outcome, time.Duration)
}

// Observe makes the limiter call f once for every permit that ends from
// now on, with its outcome and the time from its acquire to its end (the
// RTT of a sample), until stop is called: for a latency histogram, such as
// package adaptiveotel's. f runs on the goroutine that ends the permit,
// after the slot is free and the controller has seen the sample, with no
// lock held: a slow f slows that request alone, and an f that panics
// leaves the limiter as it would be without it, the panic going on to
// that goroutine. f must be safe for concurrent use. Calling stop more
// than once does nothing.
//
// A limiter has at most one observer: Observe returns ErrObserved, and
// registers nothing, while another is registered. It is a run-time error
// to pass a nil f or to call Observe on a nil Limiter.
//
// Without an observer, a permit's end costs one atomic load more.
func (l *Limiter) Observe(f func(o Outcome, rtt time.Duration)) (stop func(), err error) {
	l.mustExist()
	if f == nil {
		panic("adaptive: Limiter.Observe: nil f")
	}
	o := &observer{f: f}
	if !l.obs.CompareAndSwap(nil, o) {
		return nil, ErrObserved
	}
	return func() { l.obs.CompareAndSwap(o, nil) }, nil
}

// Stats is a snapshot of a Limiter, for metrics.
type Stats struct {
	Limit     int64         // the limit in force
	InFlight  int64         // permits out: acquired and not yet ended
	Waiters   int           // Acquire calls waiting for a slot
	LastRTT   time.Duration // the RTT of the last request that ended in Succeeded; 0 before the first
	Succeeded uint64        // requests ended in Succeeded
	Dropped   uint64        // requests ended in Dropped
	Ignored   uint64        // requests ended in Ignored
	Rejected  uint64        // TryAcquire calls that found no free slot
	Closed    bool
}

// Stats returns a snapshot of the limiter. The counts come from separate
// reads and need not be consistent with each other to the request; InFlight
// may briefly exceed Limit after the limit is lowered, while the requests
// admitted under the higher limit finish. Stats takes the limiter's lock and
// the semaphore's; it is meant for monitoring, not for a hot path. It is a
// run-time error to call it on a nil Limiter.
func (l *Limiter) Stats() Stats {
	l.mustExist()
	st := l.limitStats()
	l.mu.Lock()
	s := Stats{
		Limit:     st.Limit,
		InFlight:  st.Held,
		Waiters:   st.Waiters,
		LastRTT:   l.lastRTT,
		Succeeded: l.success,
		Dropped:   l.dropped,
		Ignored:   l.ignored,
		Rejected:  l.rejected.Load(),
		Closed:    st.Closed,
	}
	l.mu.Unlock()
	return s
}

// Close closes the limiter: waiting Acquire calls return
// atomicsem.ErrClosed, later acquires fail, and the limit stays where it is.
// Permits already out may still be ended. Closing twice does nothing. It is
// a run-time error to call it on a nil Limiter.
func (l *Limiter) Close() {
	l.mustExist()
	l.closeLimit()
}
