package overload

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Gate is a concurrency limit shared by classes of requests, in priority
// order, each with a guaranteed share of the limit and a bound on what it
// may borrow, and with a queue discipline for the requests that must wait.
//
// # Admission
//
// A request of class c for n permits is admitted at once, in one
// compare-and-swap of the gate's word, when the permits held in all stay
// within the limit, class c stays within its ceiling (⌈MaxShare × limit⌉),
// no waiter is queued that the request must not overtake, and no class
// above sheds the classes below (WithCoDel). Otherwise it waits, and
// Acquire returns a token once the permits are granted to it.
// The global limit is never exceeded by an admission: the total, the
// class's count and the limit are read and changed in the same CAS.
//
// # Shares, borrowing and service order
//
// Class c's reserve at limit L is ⌈S_c·L⌉ − ⌈S_{c−1}·L⌉, where S_c is the
// sum of the shares of c and the classes above it: the reserves add up to
// at most L, and rounding favours the higher classes. A class may hold more
// than its reserve, up to its ceiling, by borrowing what others leave idle:
// reserves are lent, not locked away. When waiters are queued, permits are
// granted, as they come back or the limit rises, in this order:
//
//  1. a waiter whose request fits in its class's unused reserve (the class
//     would still hold no more than its reserve), highest class first: the
//     guarantee. While one waits, every arrival queues, so no permit that
//     comes back goes to anyone else, and no class holding its reserve or
//     more is admitted. A class's guaranteed share is therefore always
//     within reach: it waits only for permits lent out to come back;
//  2. a starving waiter (below): the oldest waiter of a class that has not
//     been served for the starvation bound;
//  3. by priority: the next waiter of the highest class that has one,
//     skipping classes at their ceiling. A waiter that needs more permits
//     than are free holds back the classes below it, so that a large
//     request is not starved by a stream of small ones.
//
// Within a class, waiters are served in arrival order, or newest first
// while the class's queue is overloaded (WithCoDel). An arrival of class c
// takes free permits without the lock while nobody of its own class or
// above waits (and no reserve is owed to a waiter, and no class starves):
// higher classes overtake lower waiters, which is what priority means.
//
// # Starvation bound
//
// Strict priority starves the lowest classes for as long as the higher ones
// want the whole limit. A class with a share is never starved below its
// reserve; beyond it, and for a class without one, WithStarvationBound
// (DefaultStarvationBound by default) bounds the wait: once the oldest
// waiter of a class has waited the bound and no waiter of that class has
// been granted for as long, it is served before every waiter of a higher
// class and every arrival, as soon as permits come back. So each class
// with waiters is served at least once per bound (plus the time for the
// permits it asks for to come back), and a class that starves takes at most
// one grant per bound from the classes above it. While a class above sheds
// the classes below it (WithCoDel), they are shed instead.
//
// # Queue discipline
//
//   - WithMaxQueue bounds the waiters of all classes together. An arrival
//     that would have to wait in a full queue pushes out a waiter of the
//     lowest class below its own that has one (the waiter that would be
//     served last), or, if there is none, is refused at once; either gets
//     ErrQueueFull.
//   - WithMaxWait bounds each wait: a waiter is refused with ErrMaxWait at
//     the shorter of the maximum wait and its context's deadline (which
//     ends the wait with ctx.Err()).
//   - WithCoDel turns on the overload mode of each class's queue, after
//     CoDel and Facebook's adaptive LIFO. A queue's delay is the age of
//     its oldest waiter (zero when it is empty), observed at each arrival
//     that must queue, each release while waiters are queued or classes
//     are shed, each cancellation and each limit change. Once it has stayed
//     above the target for an interval, the class is overloaded: its queue
//     serves its newest waiters first and drops, with ErrDropped, those that
//     have waited more than twice the target. It returns to arrival order
//     once its delay has stayed at or below the target for an interval:
//     its standing queue has drained. (A queue served newest first empties
//     for a moment now and then while its class is still overloaded; such
//     a moment does not end the mode.)
//   - Shedding by priority: from the moment a class enters the overload
//     mode until its queue has stayed empty for the shed hold, four
//     intervals, every class below it is shed: its waiters are dropped and
//     its arrivals refused at once, with ErrDropped, even while a permit
//     is free for a moment. The capacity the overloaded class sheds its
//     own requests for is kept for its next ones, not given to requests it
//     outranks; only a queue that stays empty shows capacity to spare, and
//     a single interval does not show it: a class whose demand is about
//     the capacity empties its queue for an interval now and then, and a
//     request of a lower class let in then holds its permit for as long as
//     it runs, into the class's next burst. A class that holds less than
//     its reserve is not shed: a shed never takes a guarantee.
//   - Deadline awareness: the gate keeps a moving average of the time
//     between grants from its queue, per permit. An arrival that must wait
//     behind w permits' worth of waiters expects to wait (w + n) times
//     that. If its context's deadline comes before then, it is refused at
//     once with ErrDeadline; if the maximum wait is shorter, with
//     ErrMaxWait. (Before the first grant from the queue, nobody is
//     refused on an expectation.) The gate forgets the average when an
//     arrival finds nobody queued and no waiter has been granted from the
//     queue for EstimateMemory: a spell of queueing that ended that long
//     ago says little of the next, and a gate left alone comes back to the
//     state of a new one (see Idle).
//
// Time-based decisions (the overload mode's switches, drops and sheds,
// starvation) are taken when the gate's lock is taken: at each arrival that
// must queue, each release while waiters are queued or a class is
// overloaded, each cancellation and each limit change. Only the maximum
// wait and the context run on timers; the gate runs no goroutine and no
// timer of its own.
//
// # The limit
//
// The limit moves with SetLimit, as adaptive's Limiter moves a semaphore's:
// raising it serves the waiters it admits; lowering it revokes nothing, and
// nobody is admitted until the permits held are back below it. Reserves
// and ceilings follow the limit.
//
// # Memory ordering
//
// The end of a token (Release or Forget) synchronizes before the return of
// the Acquire or TryAcquire that obtains the permits it returned, as
// atomicsem's Release does; SetLimit likewise before the acquires it admits.
//
// A Gate must be made with New; the zero value is not usable. Calling a
// method on a nil *Gate, passing a nil context or a class outside
// [0, Classes()) panics with a message that begins "overload: ".
type Gate struct {
	// word is the packed state (word.go). It comes first so that it is
	// 64-bit aligned on 32-bit platforms.
	word atomic.Uint64

	mu     sync.Mutex
	queues [MaxClasses]classQueue // guarded by mu
	queued int                    // waiters in all queues; guarded by mu
	closed bool                   // guarded by mu
	// perPermit is the moving average of the time between grants from the
	// queue, per permit granted, for deadline awareness; lastGrant is when
	// the last waiter that had parked was granted, valid while
	// lastGrantOK. Guarded by mu.
	perPermit   time.Duration
	lastGrant   time.Duration
	lastGrantOK bool

	// The fields below never change after New. The queues above keep them
	// more than a cache line after word, so that the fast path's reads of
	// them do not touch word's line, which moves between cores under
	// contention.
	lay        layout
	max        int64
	classes    [MaxClasses]classConfig
	maxQueue   int
	maxWait    time.Duration
	codel      bool
	target     time.Duration
	interval   time.Duration
	starvation time.Duration
	epoch      time.Time
}

// Defaults of the queue discipline.
const (
	// DefaultStarvationBound is the starvation bound of a gate made
	// without WithStarvationBound.
	DefaultStarvationBound = time.Second
	// DefaultCoDelTarget and DefaultCoDelInterval are the overload mode's
	// target delay and interval, as in CoDel and Facebook's queues.
	DefaultCoDelTarget   = 5 * time.Millisecond
	DefaultCoDelInterval = 100 * time.Millisecond
	// EstimateMemory is how long the gate keeps its estimate of the wait
	// (see deadline awareness in Gate) after the last grant from its
	// queue, if nobody queues meanwhile. It spans the moments a queue in
	// the overload mode empties, many CoDel intervals long.
	EstimateMemory = time.Second
)

// An Option configures a Gate in New.
type Option func(*config)

type config struct {
	maxQueue   int
	maxWait    time.Duration
	codel      bool
	target     time.Duration
	interval   time.Duration
	starvation time.Duration
}

// WithMaxQueue bounds the number of waiters of all classes together; 0, the
// default, leaves it unbounded. See Gate for who is refused when it is full.
// New refuses a negative n.
func WithMaxQueue(n int) Option {
	return func(c *config) { c.maxQueue = n }
}

// WithMaxWait bounds how long a request waits for permits; 0, the default,
// leaves the wait to the context. New refuses a negative d.
func WithMaxWait(d time.Duration) Option {
	return func(c *config) { c.maxWait = d }
}

// WithCoDel turns on the queues' overload mode (see Gate) with the given
// target delay and interval; a zero target or interval means the default
// (DefaultCoDelTarget, DefaultCoDelInterval). New refuses negative ones.
func WithCoDel(target, interval time.Duration) Option {
	return func(c *config) {
		c.codel = true
		c.target, c.interval = target, interval
	}
}

// WithStarvationBound sets the starvation bound (see Gate); 0 turns it off,
// for strict priority. New refuses a negative d.
func WithStarvationBound(d time.Duration) Option {
	return func(c *config) { c.starvation = d }
}

// New returns a gate for the given classes, highest priority first, with a
// live limit of limit and a ceiling of max for SetLimit.
//
// New returns ErrInvalidPermits unless 0 ≤ limit ≤ max ≤
// MaxPermits(len(classes)), ErrInvalidClasses for classes it cannot build
// a gate of (see Class), and ErrInvalidOption for an option out of its
// range. It is a run-time error to pass a nil Option; the panic's message
// begins "overload: ".
func New(limit, max int64, classes []Class, opts ...Option) (*Gate, error) {
	cfg := config{starvation: DefaultStarvationBound}
	for _, opt := range opts {
		if opt == nil {
			panic("overload: New called with a nil Option")
		}
		opt(&cfg)
	}
	if len(classes) < 1 || len(classes) > MaxClasses {
		return nil, fmt.Errorf("%w: %d classes, want 1 to %d", ErrInvalidClasses, len(classes), MaxClasses)
	}
	lay := newLayout(len(classes))
	if limit < 0 || limit > max || max > lay.maxPermits() {
		return nil, fmt.Errorf("%w: overload: New(%d, %d) with %d classes needs 0 ≤ limit ≤ max ≤ MaxPermits(%d) = %d",
			ErrInvalidPermits, limit, max, len(classes), len(classes), lay.maxPermits())
	}
	cls, err := buildClasses(classes, &lay)
	if err != nil {
		return nil, err
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.codel {
		cfg.target = cmpOr(cfg.target, DefaultCoDelTarget)
		cfg.interval = cmpOr(cfg.interval, DefaultCoDelInterval)
	}
	g := &Gate{
		lay:        lay,
		max:        max,
		classes:    cls,
		maxQueue:   cfg.maxQueue,
		maxWait:    cfg.maxWait,
		codel:      cfg.codel,
		target:     cfg.target,
		interval:   cfg.interval,
		starvation: cfg.starvation,
		epoch:      time.Now(),
	}
	g.word.Store(uint64(lay.withLimit(0, limit)))
	return g, nil
}

func (c config) check() error {
	switch {
	case c.maxQueue < 0:
		return fmt.Errorf("%w: WithMaxQueue(%d) is negative", ErrInvalidOption, c.maxQueue)
	case c.maxWait < 0:
		return fmt.Errorf("%w: WithMaxWait(%v) is negative", ErrInvalidOption, c.maxWait)
	case c.target < 0 || c.interval < 0:
		return fmt.Errorf("%w: WithCoDel(%v, %v) is negative", ErrInvalidOption, c.target, c.interval)
	case c.starvation < 0:
		return fmt.Errorf("%w: WithStarvationBound(%v) is negative", ErrInvalidOption, c.starvation)
	}
	return nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// MustNew is like New but panics if the arguments are invalid, for
// package-level gates.
func MustNew(limit, max int64, classes []Class, opts ...Option) *Gate {
	g, err := New(limit, max, classes, opts...)
	if err != nil {
		panic(err)
	}
	return g
}

// nilGate is what a method called on a nil *Gate panics with: the
// method's name. The message is built only when it is printed.
type nilGate string

func (m nilGate) Error() string { return "overload: " + string(m) + " called on a nil *Gate" }

// valid panics if g is nil or was not made by New.
func (g *Gate) valid(method string) {
	if g == nil {
		panic(nilGate(method))
	}
	if g.lay.k == 0 {
		panic(errZeroGate)
	}
}

const errZeroGate = "overload: Gate used without New (the zero value is not usable)"

// badClass is what a method called with a class outside [0, k) panics
// with; the zero Gate, whose k is 0, fails there on its first Acquire or
// TryAcquire. Its message is built only when it is printed, and the call
// site's panic, which the compiler knows never returns, keeps the check a
// compare and a branch.
type badClass struct {
	method string
	c, k   int
}

func (e badClass) Error() string {
	if e.k == 0 {
		return errZeroGate
	}
	return fmt.Sprintf("overload: %s called with class %d, outside [0, %d)", e.method, e.c, e.k)
}

// Classes returns the number of classes of g.
func (g *Gate) Classes() int {
	g.valid("Classes")
	return g.lay.k
}

// Class returns the index of the class named name, compared without regard
// to case, and reports whether there is one.
func (g *Gate) Class(name string) (int, bool) {
	g.valid("Class")
	for c := range g.lay.k {
		if strings.EqualFold(g.classes[c].name, name) {
			return c, true
		}
	}
	return 0, false
}

// SetLimit moves the live limit to limit in one step. Raising it serves the
// waiters it now admits; lowering it never revokes a held token: nobody is
// admitted until the permits held are back below the new limit. Reserves
// and ceilings follow the limit.
//
// SetLimit returns ErrInvalidPermits if limit < 0, ErrExceedsMax if it is
// above the maximum, and ErrClosed after Close; in each case nothing
// changes.
func (g *Gate) SetLimit(limit int64) error {
	g.valid("SetLimit")
	switch {
	case limit < 0:
		return fmt.Errorf("%w: overload: SetLimit(%d)", ErrInvalidPermits, limit)
	case limit > g.max:
		return fmt.Errorf("%w: overload: SetLimit(%d) with max %d", ErrExceedsMax, limit, g.max)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	for {
		old := g.load()
		if g.cas(old, g.lay.withLimit(old, limit)) {
			break
		}
	}
	g.dispatchLocked(g.now())
	return nil
}

// Limit returns the live limit: one load of the word, without the lock.
func (g *Gate) Limit() int64 {
	g.valid("Limit")
	return g.lay.limit(g.load())
}

// Held returns the permits held by tokens of all classes at one moment: one
// load of the word, without the lock, for a hot path (adaptive's limiter
// reads the requests in flight this way). It may exceed the limit after
// the limit was lowered.
func (g *Gate) Held() int64 {
	g.valid("Held")
	return g.lay.held(g.load())
}

// Close closes the gate: every waiter gets ErrClosed, and later Acquire,
// TryAcquire and SetLimit calls fail. Tokens already out may still be
// released. Closing a closed gate does nothing.
func (g *Gate) Close() {
	g.valid("Close")
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	for {
		old := g.load()
		if g.cas(old, old.withBlocks(allBlocks)) {
			break
		}
	}
	for c := range g.lay.k {
		q := &g.queues[c]
		for q.head != nil {
			g.refuseLocked(q.head, ErrClosed)
		}
	}
}

// Stats is a snapshot of a gate.
type Stats struct {
	Limit   int64 // the live limit
	Held    int64 // permits held by tokens of all classes
	Max     int64 // the ceiling of the limit, fixed by New
	Waiters int   // waiters of all classes
	Closed  bool
	// Classes holds one entry per class, in priority order.
	Classes []ClassStats
}

// ClassStats is a class's part of a Stats snapshot.
type ClassStats struct {
	Name       string
	Held       int64 // permits held by tokens of the class
	Reserve    int64 // its guaranteed share at the live limit, in permits
	Ceiling    int64 // the most it may hold at the live limit
	Waiters    int
	Overloaded bool // its queue is in the overload mode (newest first, lower classes shed), as of the last look at it
	// The requests of the class shed so far, by reason.
	QueueFull, MaxWait, Dropped, Deadline uint64
}

// Stats returns a snapshot of the gate, taken under its lock, so that the
// counts agree with each other. It is meant for monitoring and tests.
func (g *Gate) Stats() Stats {
	g.valid("Stats")
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.load()
	limit := g.lay.limit(w)
	st := Stats{
		Limit:   limit,
		Held:    g.lay.held(w),
		Max:     g.max,
		Waiters: g.queued,
		Closed:  g.closed,
		Classes: make([]ClassStats, g.lay.k),
	}
	for c := range st.Classes {
		q, cc := &g.queues[c], &g.classes[c]
		st.Classes[c] = ClassStats{
			Name:       cc.name,
			Held:       g.lay.classHeld(w, c),
			Reserve:    cc.reserveAt(limit),
			Ceiling:    cc.ceilingAt(limit),
			Waiters:    q.len,
			Overloaded: q.lifo,
			QueueFull:  q.shed[shedQueueFull],
			MaxWait:    q.shed[shedMaxWait],
			Dropped:    q.shed[shedDropped],
			Deadline:   q.shed[shedDeadline],
		}
	}
	return st
}

// Idle reports whether g is indistinguishable from a gate that New would
// make now with g's arguments and g's live limit: no permit is held,
// nobody waits, g is not closed, and no state that time keeps would make
// a later call answer otherwise. That state is the overload mode's (a
// class in it or entering it, or shedding the classes below; see
// WithCoDel) and the estimate of the wait (kept for EstimateMemory after
// the last grant from the queue). The starvation bound keeps none once a
// class's queue is empty: a later waiter's wait counts from its own
// arrival. Only the counts of sheds in Stats tell an idle g from a new
// gate.
//
// Idle takes the gate's lock, and when nothing is held and nobody waits it
// first takes the time-based decisions due now, as every call that takes
// the lock does (see Gate): an overload mode whose time has run out ends,
// and the classes it shed are admitted again, by TryAcquire too. It is
// meant for a table of gates that drops those it can make again (keyed's
// Gates), and for tests; the answer may be stale as soon as it is
// returned unless the caller keeps every other user of g out meanwhile.
func (g *Gate) Idle() bool {
	g.valid("Idle")
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.queued != 0 || g.lay.held(g.load()) != 0 {
		return false
	}
	now := g.now()
	if g.perPermit != 0 && now-g.lastGrant < EstimateMemory {
		return false
	}
	// With nothing held and nobody queued, the dispatch grants nothing: it
	// only moves the overload mode to now and sets the block bits to match.
	g.dispatchLocked(now)
	for c := range g.lay.k {
		if q := &g.queues[c]; q.above || q.lifo || q.shedding {
			return false
		}
	}
	return g.load().blocks() == 0
}

// now returns the time since the gate was made, from the monotonic clock.
func (g *Gate) now() time.Duration { return time.Since(g.epoch) }

func (g *Gate) load() word { return word(g.word.Load()) }
func (g *Gate) cas(old, next word) bool {
	return g.word.CompareAndSwap(uint64(old), uint64(next))
}
