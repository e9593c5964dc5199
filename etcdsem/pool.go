package etcdsem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// DefaultPoolInterval is a Pool's interval unless WithPoolInterval sets
// another.
const DefaultPoolInterval = 500 * time.Millisecond

// ErrPoolClosed is returned by a Pool's methods after Close.
var ErrPoolClosed = errors.New("etcdsem: pool is closed")

// A PoolOption configures a Pool in NewPool.
type PoolOption func(*poolOptions) error

type poolOptions struct {
	interval time.Duration
}

// WithPoolInterval sets a Pool's interval (DefaultPoolInterval otherwise):
// the pool looks at the fleet every half interval, and gives back permits
// that no local holder used for an interval. It must be at least 10 ms.
func WithPoolInterval(d time.Duration) PoolOption {
	return func(o *poolOptions) error {
		if d < 10*time.Millisecond {
			return fmt.Errorf("etcdsem: pool interval %v is under 10ms", d)
		}
		o.interval = d
		return nil
	}
}

// A Pool leases permits of a fleet semaphore into this process: it holds
// blocks of the semaphore's permits, each taken by one weighted Acquire,
// and serves the process's acquires from them through an in-process
// atomicsem semaphore, so that a local acquire and release cost what
// atomicsem's do, with no round trip.
//
// # Model
//
// The pool's local semaphore has as many permits as the pool holds in
// etcd (less those it is giving back). A local acquire that the local
// permits do not cover waits, in FIFO order with the other local
// acquires, while the pool takes the shortfall from the fleet with one
// Acquire of the semaphore (in the fleet's FIFO order). A local release
// returns the permits to the local pool, not to etcd. Every half interval
// (WithPoolInterval) the pool reads the semaphore (one round trip) and
// gives back, in one round trip per block it shrinks:
//
//   - the permits that no local holder used during the last interval (the
//     two half intervals before the look), so that idle permits go back
//     within an interval and a half and a round trip;
//   - while another process waits for permits, or the semaphore holds more
//     than its limit (SetLimit lowered it), the permits above the pool's
//     fair share: the largest share such that every process that wants
//     more gets as much (max-min fairness over what each process's keys
//     hold and wait for, the pool's own counted by its use). Permits in
//     use go back as they are released, ahead of any local acquire that
//     arrives after the pool decided to give them back.
//
// So a lowered limit reaches the pools within half an interval and a
// round trip for idle permits, and as local holders release for the rest;
// a process waiting for permits that another pool keeps idle is blocked at
// most half an interval and a round trip (the pool's next look sees it
// waiting).
//
// # The limit stays exact
//
// Every permit the pool hands out locally is held in etcd by one of its
// blocks: the permits in use in the fleet are never more than the permits
// etcd grants, which never exceed the limit (as for any Acquire). A
// process that crashes gives its blocks back when its session's lease
// ends, as any holder's.
//
// # Failure
//
// A pool that cannot reach etcd goes on serving the permits it holds, and
// no more (it fails closed), only for as long as its session's lease is
// sure to last: it learns the lease's time to live at each look, and stops
// serving local acquires (they fail with ErrUnavailable) when that time,
// counted from the look's request, is within a sixteenth of running out,
// since etcd may then give its permits to others. Local tokens already out
// are not revoked: their holders must guard their writes as for any
// etcdsem token (see Fence). A pool whose session ends fails its acquires
// with ErrSessionLost. Once etcd answers again, the pool serves again.
//
// A local token's Release returns its permits to the pool; Forget takes
// them out of the pool, which gives them back to the fleet at its next
// look (the fleet's limit is not lowered).
//
// A Pool must be made with NewPool; its methods are safe for concurrent
// use. It runs one goroutine, and one more while it waits for permits from
// etcd or for local holders to release permits it gives back; Close ends
// them.
type Pool struct {
	s        *Semaphore
	interval time.Duration

	local  atomic.Pointer[atomicsem.Semaphore] // replaced when the pool stops serving
	peak   atomic.Int64                        // the most permits in use locally since the last look
	wanted atomic.Int64                        // permits that local acquires waiting need
	kick   chan struct{}                       // capacity 1: wakes the pool's goroutine
	quit   chan struct{}                       // closed by Close
	exited chan struct{}                       // closed when the goroutine returns
	events chan poolEvent                      // from the helpers: a block acquired, permits taken back

	mu       sync.Mutex
	closed   bool               // guarded by mu
	err      error              // why the local semaphore was closed, if it was; guarded by mu
	blocks   []poolBlock        // guarded by mu
	held     int64              // permits the blocks hold, guarded by mu
	retired  []retiredPool      // local semaphores no longer served from, and their blocks; guarded by mu
	stats    PoolStats          // guarded by mu
	helpers  sync.WaitGroup     // the helper goroutines
	fetch    context.CancelFunc // cancels the Acquire in flight, nil if none; guarded by mu
	fetchN   int64              // its weight, guarded by mu
	shrink   context.CancelFunc // cancels the local acquire of permits to give back, nil if none; guarded by mu
	lastPeak int64              // the peak use of the window before the last look, guarded by mu
	expiry   *time.Timer        // fires at valid, guarded by mu
	ceiling  int64              // the most the pool may hold, as its last full look decided; guarded by mu

	// valid is when the session's lease may run out, as far as the pool
	// knows (UnixNano; 0 before it has asked): it serves until then.
	valid atomic.Int64
}

// poolBlock is one token of the pool's, held in etcd.
type poolBlock struct {
	tok *token.Token
	n   int64
}

// retiredPool is a local semaphore the pool no longer serves from, whose
// blocks are given back once its holders have released.
type retiredPool struct {
	local  *atomicsem.Semaphore
	blocks []poolBlock
}

// poolEvent is what a helper goroutine reports: a fetch that ended (with
// a block, or an error), or a shrink that ended.
type poolEvent struct {
	block  poolBlock // the block fetched (n 0 if none)
	err    error     // the fetch's error
	shrunk bool      // a shrink ended
}

// PoolStats is a snapshot of a Pool.
type PoolStats struct {
	// Held is the permits the pool holds in etcd; InUse those its local
	// holders hold now; Waiting the local acquires waiting.
	Held, InUse int64
	Waiting     int
	// Calls counts the pool's round trips to etcd (reads, acquires,
	// releases and lease checks), Failures those that failed.
	Calls, Failures int64
	// Share is the pool's fair share at its last look, or -1 while no
	// other process waited and the semaphore held no more than its limit.
	Share int64
}

// NewPool returns a pool that leases permits of s into this process. It
// sends nothing to etcd until the first acquire. It returns an error for
// an invalid option; it is a run-time error if s is nil or not made by
// New, or an option is nil.
func NewPool(s *Semaphore, opts ...PoolOption) (*Pool, error) {
	s.check("NewPool", context.Background())
	o := poolOptions{interval: DefaultPoolInterval}
	for _, opt := range opts {
		if opt == nil {
			panic("etcdsem: NewPool: nil PoolOption")
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	p := &Pool{
		s:        s,
		interval: o.interval,
		kick:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		exited:   make(chan struct{}),
		events:   make(chan poolEvent, 4),
	}
	p.local.Store(atomicsem.MustNew(0, s.max))
	p.stats.Share = -1
	go p.run()
	return p, nil
}

// Acquire takes n permits from the pool, waiting for them while the pool
// takes them from the fleet if it holds too few, and returns a local token
// for them. Acquiring 0 permits succeeds at once.
//
// On failure it returns the zero Token and takes nothing: ErrInvalidPermits
// for n < 0 or above MaxPermits, ErrExceedsMax for n above the semaphore's
// maximum, ctx.Err() if ctx ends first, ErrPoolClosed after Close, and,
// while it waits, ErrUnavailable or ErrSessionLost if the pool stops
// serving (see Pool), or the error of the fleet Acquire made for it. It is
// a run-time error if ctx is nil.
func (p *Pool) Acquire(ctx context.Context, n int64) (tok token.Token, err error) {
	l := p.local.Load()
	var ok bool
	if tok, ok = l.TryAcquire(n); ok && n > 0 {
		p.used(l)
		return
	}
	return p.acquireSlow(ctx, n)
}

// used notes the permits in use after a local acquire, for the pool's
// count of its peak use.
func (p *Pool) used(l *atomicsem.Semaphore) {
	if h := l.Held(); h > p.peak.Load() {
		p.peak.Store(h)
	}
}

// acquireSlow is Acquire when the local permits do not cover n, outlined
// so that the fast path can be inlined.
func (p *Pool) acquireSlow(ctx context.Context, n int64) (tok token.Token, err error) {
	if err := p.checkRequest(ctx, n); err != nil || n == 0 {
		if err != nil {
			return token.Token{}, err
		}
		return token.Empty(), nil
	}
	for {
		l := p.local.Load()
		p.wanted.Add(n)
		p.wake()
		tok, err = l.Acquire(ctx, n)
		p.wanted.Add(-n)
		if err == nil {
			p.used(l)
			return
		}
		if ctx.Err() != nil {
			return token.Token{}, ctx.Err()
		}
		if !errors.Is(err, atomicsem.ErrClosed) {
			return token.Token{}, err
		}
		p.mu.Lock()
		closed, perr := p.closed, p.err
		p.mu.Unlock()
		switch {
		case closed:
			return token.Token{}, ErrPoolClosed
		case perr != nil:
			return token.Token{}, perr
		}
		// The local semaphore was replaced: look again.
	}
}

// TryAcquire takes n permits from the pool if it holds them free now, or
// else, if no local acquire waits, if the semaphore grants the shortfall
// at once (one or two round trips, as Semaphore.TryAcquire), and reports
// whether it did. It returns an error, taking nothing, for the inputs
// Acquire refuses, ctx.Err() if ctx is done, ErrPoolClosed after Close,
// ErrUnavailable or ErrSessionLost while the pool does not serve, and the
// semaphore's TryAcquire's errors.
func (p *Pool) TryAcquire(ctx context.Context, n int64) (tok token.Token, ok bool, err error) {
	l := p.local.Load()
	if tok, ok = l.TryAcquire(n); ok && n > 0 {
		p.used(l)
		return
	}
	if err := p.checkRequest(ctx, n); err != nil || n == 0 {
		if err != nil {
			return token.Token{}, false, err
		}
		return token.Empty(), true, nil
	}
	st := l.Stats()
	if st.Waiters > 0 {
		return token.Token{}, false, nil
	}
	short := n - max(st.Available, 0)
	block := new(token.Token)
	*block, ok, err = p.s.TryAcquire(ctx, short)
	p.count(err)
	if err != nil || !ok {
		return token.Token{}, false, err
	}
	p.add(l, poolBlock{block, short})
	if tok, ok = l.TryAcquire(n); ok {
		p.used(l)
		return
	}
	return token.Token{}, false, nil
}

// checkRequest validates a request of n permits made with ctx.
func (p *Pool) checkRequest(ctx context.Context, n int64) error {
	if ctx == nil {
		panic("etcdsem: Pool: nil context")
	}
	if n < 0 || n > MaxPermits {
		return fmt.Errorf("%w: a request for %d", ErrInvalidPermits, n)
	}
	if n > p.s.max {
		return fmt.Errorf("%w: a request for %d, the maximum is %d", ErrExceedsMax, n, p.s.max)
	}
	p.mu.Lock()
	closed, err := p.closed, p.err
	p.mu.Unlock()
	switch {
	case closed:
		return ErrPoolClosed
	case err != nil:
		// The pool does not serve now; a new acquire waits for it to
		// serve again only through Acquire's wait on the local
		// semaphore, which the pool replaces when it does.
	}
	return ctx.Err()
}

// add puts a block acquired from the fleet into the pool, and its permits
// into the local semaphore l, if l is still the one served from; else into
// the pool's blocks to give back.
func (p *Pool) add(l *atomicsem.Semaphore, b poolBlock) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.local.Load() != l || p.closed {
		p.retired = append(p.retired, retiredPool{blocks: []poolBlock{b}})
		p.wake()
		return
	}
	p.blocks = append(p.blocks, b)
	p.held += b.n
	l.Refill(b.n)
}

// count counts a round trip that ended with err.
func (p *Pool) count(err error) {
	p.mu.Lock()
	p.stats.Calls++
	if err != nil && !errors.Is(err, context.Canceled) {
		p.stats.Failures++
	}
	p.mu.Unlock()
}

// wake wakes the pool's goroutine, if it is not awake already.
func (p *Pool) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Stats returns a snapshot of the pool; it sends nothing to etcd.
func (p *Pool) Stats() PoolStats {
	st := p.local.Load().Stats()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.stats
	out.Held = p.held
	out.InUse = st.Held
	out.Waiting = st.Waiters
	return out
}

// Close ends the pool: it stops its goroutines, fails the local acquires
// waiting and those made later with ErrPoolClosed, waits until the local
// holders have released (or ctx ends), and gives every block back to the
// fleet. It returns ctx.Err() if ctx ended first: the blocks whose
// permits were still in use then stay held until the session ends.
// Closing a closed pool does nothing and returns nil. It is a run-time
// error if ctx is nil.
func (p *Pool) Close(ctx context.Context) error {
	if ctx == nil {
		panic("etcdsem: Pool.Close: nil context")
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	close(p.quit)
	<-p.exited
	p.mu.Lock()
	if p.expiry != nil {
		p.expiry.Stop()
	}
	p.mu.Unlock()
	l := p.local.Load()
	l.Close()
	err := l.WaitIdle(ctx)
	p.mu.Lock()
	blocks := p.blocks
	p.blocks, p.held = nil, 0
	for _, r := range p.retired {
		if r.local == nil || r.local.Held() == 0 || err == nil {
			blocks = append(blocks, r.blocks...)
		}
	}
	p.retired = nil
	p.mu.Unlock()
	if err != nil {
		// Give back only what no local holder holds.
		blocks = p.takeFree(blocks, l.Held())
	}
	for _, b := range blocks {
		b.tok.Release()
		p.count(nil)
	}
	return err
}

// takeFree returns the part of blocks beyond inUse permits, splitting a
// block where it must; the rest stays held.
func (p *Pool) takeFree(blocks []poolBlock, inUse int64) []poolBlock {
	var free []poolBlock
	for _, b := range blocks {
		switch {
		case inUse >= b.n:
			inUse -= b.n
		case inUse > 0:
			part, _ := b.tok.Split(b.n - inUse)
			free = append(free, poolBlock{&part, b.n - inUse})
			inUse = 0
		default:
			free = append(free, b)
		}
	}
	return free
}

// run is the pool's goroutine: it looks at the pool and the fleet when a
// local acquire is short, a helper reports, and every half interval while
// the pool holds or wants permits.
func (p *Pool) run() {
	defer close(p.exited)
	defer p.stopHelpers()
	t := time.NewTimer(p.interval / 2)
	defer t.Stop()
	last := time.Time{}
	for {
		select {
		case <-p.kick:
		case ev := <-p.events:
			p.handle(ev)
		case <-t.C:
		case <-p.quit:
			return
		}
		// A full look (a read of the semaphore) is due every half
		// interval; a kick in between only starts a fetch.
		full := time.Since(last) >= p.interval/2
		if full {
			last = time.Now()
		}
		t.Reset(p.look(full))
	}
}

// stopHelpers cancels the helper goroutines and waits for them, giving
// back a block that one of them acquired after all.
func (p *Pool) stopHelpers() {
	p.mu.Lock()
	for _, c := range []context.CancelFunc{p.fetch, p.shrink} {
		if c != nil {
			c()
		}
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.helpers.Wait(); close(done) }()
	for {
		select {
		case ev := <-p.events:
			p.handle(ev)
		case <-done:
			for {
				select {
				case ev := <-p.events:
					p.handle(ev)
				default:
					return
				}
			}
		}
	}
}

// handle applies a helper's report.
func (p *Pool) handle(ev poolEvent) {
	switch {
	case ev.block.n > 0:
		p.mu.Lock()
		p.fetch = nil
		p.fetchN = 0
		l := p.local.Load()
		p.mu.Unlock()
		p.add(l, ev.block)
	case ev.shrunk:
		p.mu.Lock()
		p.shrink = nil
		p.mu.Unlock()
	default:
		p.mu.Lock()
		p.fetch = nil
		p.fetchN = 0
		p.mu.Unlock()
		if errors.Is(ev.err, ErrClosed) || errors.Is(ev.err, ErrSessionLost) {
			// No later fetch can succeed: the local acquires waiting, and
			// those to come, fail with the reason.
			p.stopServing(ev.err)
		}
	}
}

// look is one look at the pool and, if full, at the fleet: it gives back
// what is due, starts the fetches and shrinks that are due, and returns
// how long to sleep until the next look.
func (p *Pool) look(full bool) time.Duration {
	s := p.s
	now := time.Now()
	select {
	case <-s.Done():
		p.stopServing(s.Err())
		return time.Hour
	default:
	}
	p.mu.Lock()
	holding, stopped := p.held > 0 || len(p.retired) > 0, p.err != nil
	p.mu.Unlock()
	if holding && now.UnixNano() >= p.valid.Load() {
		p.stopServing(fmt.Errorf("%w: the pool could not confirm its session's lease", ErrUnavailable))
	}
	p.giveBackRetired()

	var v *view
	if full && (holding || stopped || p.wanted.Load() > 0) {
		v = p.readFleet()
	}
	l := p.local.Load()
	p.mu.Lock()
	if p.err != nil && v != nil && !errors.Is(p.err, ErrSessionLost) {
		// etcd answers and the lease lasts: serve again, from a fresh
		// local semaphore.
		p.err = nil
		l = atomicsem.MustNew(0, s.max)
		p.local.Store(l)
	}
	lim, _ := l.TryForget(0)
	inUse := l.Held()
	avail := lim - inUse
	need := p.wanted.Load() - avail
	// Permits out of the local limit (given back by the pool's shrink,
	// or forgotten by a local holder) go back to the fleet.
	back := p.held - lim
	p.mu.Unlock()
	if back > 0 {
		p.release(back)
	}

	// What the pool keeps: what it used in the last interval (the peak
	// of the two looks' windows), less what is above its fair share while
	// others wait.
	peak := max(p.peak.Swap(inUse), inUse)
	keep := max(peak, p.prevPeak(peak))
	share := int64(-1)
	if v != nil {
		share = p.fairShare(v, max(keep, inUse)+max(need, 0))
	}
	p.mu.Lock()
	p.stats.Share = share
	p.mu.Unlock()
	if share >= 0 {
		keep = min(keep, share)
	}
	if full && lim > keep && (share >= 0 || p.wanted.Load() == 0) {
		p.giveBack(l, lim-keep, share >= 0)
	}

	// A shortfall is fetched from the fleet; a fetch no longer needed is
	// cancelled.
	p.mu.Lock()
	fetching, fetchN := p.fetch != nil, p.fetchN
	p.mu.Unlock()
	// A fetch asks for no more than the limit leaves the pool, nor, while
	// others wait, more than its share: a weighted Acquire that asks for
	// more than will be free holds back every acquirer behind it. The
	// rest of the need is served as local holders release.
	p.mu.Lock()
	if v != nil {
		// The most the pool may hold once its fetch is granted: its share
		// while others wait, else what it holds and what is free (at least
		// one more, so that a pool that waits is seen waiting).
		switch {
		case share >= 0:
			p.ceiling = share
		default:
			p.ceiling = p.held + max(v.cfg.Limit-v.held(), 1)
		}
	}
	allowed := min(s.cachedConfig().Limit, p.ceiling) - p.held
	p.mu.Unlock()
	switch {
	case need > 0 && !fetching && allowed > 0 && p.serving():
		p.startFetch(min(need, allowed))
	case fetching && (need <= 0 || fetchN > max(allowed, 0)):
		p.mu.Lock()
		if p.fetch != nil {
			p.fetch()
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	idle := p.held == 0 && len(p.retired) == 0 && p.fetch == nil
	p.mu.Unlock()
	if idle && p.wanted.Load() == 0 {
		return time.Hour
	}
	return p.interval / 2
}

// prevPeak remembers the peak of the window before the last and returns
// it, storing peak for the next look.
func (p *Pool) prevPeak(peak int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.lastPeak
	p.lastPeak = peak
	return prev
}

// serving reports whether the pool serves local acquires now.
func (p *Pool) serving() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err == nil && !p.closed
}

// readFleet reads the semaphore and confirms the session's lease, in two
// round trips; it returns nil if either fails.
func (p *Pool) readFleet() *view {
	s := p.s
	ctx, cancel := context.WithTimeout(context.Background(), min(p.interval, s.timeout))
	defer cancel()
	sent := time.Now()
	ttl, err := s.client.TimeToLive(ctx, s.session.Lease())
	p.count(err)
	if err != nil {
		return nil
	}
	if !p.noteTTL(sent, ttl.TTL) {
		return nil
	}
	v, err := s.read(ctx)
	p.count(err)
	if err != nil {
		return nil
	}
	return v
}

// noteTTL records a time to live of ttl seconds that etcd gave the
// session's lease in answer to a request sent at sent, and reports
// whether the lease lives. The pool serves until a sixteenth of it is
// left, counted from the request: etcd may answer late.
func (p *Pool) noteTTL(sent time.Time, ttl int64) bool {
	if ttl <= 0 {
		p.stopServing(fmt.Errorf("%w: its lease has expired", ErrSessionLost))
		return false
	}
	left := time.Duration(ttl) * time.Second
	until := sent.Add(left - left/16)
	p.mu.Lock()
	defer p.mu.Unlock()
	if until.UnixNano() > p.valid.Load() {
		p.valid.Store(until.UnixNano())
		// The pool stops serving at the validity's end by a timer of its
		// own, so that a look held up by a slow round trip cannot make it
		// late.
		if p.expiry == nil {
			p.expiry = time.AfterFunc(time.Until(until), p.expire)
		} else {
			p.expiry.Reset(time.Until(until))
		}
	}
	return true
}

// expire stops serving if the session's lease may have run out.
func (p *Pool) expire() {
	if time.Now().UnixNano() >= p.valid.Load() {
		p.stopServing(fmt.Errorf("%w: the pool could not confirm its session's lease", ErrUnavailable))
	}
}

// fairShare returns the pool's max-min fair share of the limit in view v,
// where the pool itself wants want, or -1 if no other process waits and v
// holds no more than its limit. Each other process wants what its keys
// hold and wait for; the share is the largest amount such that every
// process that wants more gets as much and those that want less get what
// they want, all within the limit.
func (p *Pool) fairShare(v *view, want int64) int64 {
	mine := p.s.handleKeys()
	wants := map[string]int64{}
	othersWait := false
	for _, e := range v.entries {
		if strings.HasPrefix(e.key, mine) {
			continue
		}
		h := e.key[:strings.LastIndexByte(e.key, '-')]
		wants[h] += e.n
		if !e.held {
			othersWait = true
		}
	}
	if !othersWait && v.held() <= v.cfg.Limit {
		return -1
	}
	all := []int64{want}
	for _, w := range wants {
		all = append(all, w)
	}
	return maxMinShare(v.cfg.Limit, all)
}

// maxMinShare returns the max-min fair share of capacity among wants: the
// largest level such that giving each want min(want, level) fits in
// capacity (when the wants fit, the largest want).
func maxMinShare(capacity int64, wants []int64) int64 {
	lo, hi := int64(0), capacity
	for _, w := range wants {
		hi = max(hi, w)
	}
	fits := func(level int64) bool {
		var sum int64
		for _, w := range wants {
			sum += min(w, level)
			if sum > capacity {
				return false
			}
		}
		return true
	}
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// handleKeys returns the beginning of the names of the keys this handle
// writes.
func (s *Semaphore) handleKeys() string {
	return fmt.Sprintf("%s%016x-%016x-", s.keyDir, int64(s.session.Lease()), s.id)
}

// giveBack takes up to k permits out of the local semaphore l to give them
// back to the fleet: the free ones at once, and, if wait, the rest as
// local holders release them, through a local acquire that queues with
// the local acquires (so that those that came first are served first).
func (p *Pool) giveBack(l *atomicsem.Semaphore, k int64, wait bool) {
	lim, _ := l.TryForget(0)
	free := min(k, lim-l.Held())
	if free > 0 {
		if _, ok := l.TryForget(free); ok {
			k -= free
			p.wake()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if k <= 0 || !wait || p.shrink != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.shrink = cancel
	p.helpers.Add(1)
	go func() {
		defer p.helpers.Done()
		defer cancel()
		if tok, err := l.Acquire(ctx, k); err == nil {
			tok.Forget() // out of the local limit: the next look gives it back
		}
		select {
		case p.events <- poolEvent{shrunk: true}:
		case <-p.quit:
		}
	}()
}

// release gives k permits of the pool's blocks back to the fleet.
func (p *Pool) release(k int64) {
	p.mu.Lock()
	var out []poolBlock
	for k > 0 && len(p.blocks) > 0 {
		b := &p.blocks[len(p.blocks)-1]
		if b.n <= k {
			out = append(out, *b)
			k -= b.n
			p.held -= b.n
			p.blocks = p.blocks[:len(p.blocks)-1]
			continue
		}
		part, _ := b.tok.Split(k)
		out = append(out, poolBlock{&part, k})
		b.n -= k
		p.held -= k
		k = 0
	}
	p.mu.Unlock()
	p.releaseAsync(out)
}

// releaseAsync releases blocks in a helper goroutine: a release is a round
// trip (retried for up to the handle's timeout), which must not hold up
// the pool's looks.
func (p *Pool) releaseAsync(blocks []poolBlock) {
	if len(blocks) == 0 {
		return
	}
	p.helpers.Add(1)
	go func() {
		defer p.helpers.Done()
		for _, b := range blocks {
			b.tok.Release()
			p.count(nil)
		}
	}()
}

// startFetch starts a helper that acquires k permits from the fleet for
// the pool.
func (p *Pool) startFetch(k int64) {
	l := p.local.Load()
	ctx, cancel := context.WithCancel(context.Background())
	p.mu.Lock()
	p.fetch, p.fetchN = cancel, k
	p.mu.Unlock()
	p.helpers.Add(1)
	go func() {
		defer p.helpers.Done()
		defer cancel()
		// The pool serves what it fetches only while its lease lasts: ask
		// how long that is before the Acquire.
		sent := time.Now()
		tctx, tcancel := context.WithTimeout(ctx, p.s.timeout)
		ttl, err := p.s.client.TimeToLive(tctx, p.s.session.Lease())
		tcancel()
		p.count(err)
		tok := new(token.Token)
		if err == nil && p.noteTTL(sent, ttl.TTL) {
			*tok, err = p.s.Acquire(ctx, k)
			p.count(err)
		} else if err == nil {
			err = ErrSessionLost
		} else {
			err = p.s.rpcError(ctx, err)
		}
		ev := poolEvent{err: err}
		if err == nil {
			ev.block = poolBlock{tok, k}
		}
		select {
		case p.events <- ev:
		case <-p.quit:
			if err == nil {
				p.add(l, ev.block) // retired, and given back by Close
			}
		}
	}()
}

// stopServing closes the local semaphore with err as the reason: local
// acquires fail with it until the pool serves again. Its blocks are given
// back once its holders have released.
func (p *Pool) stopServing(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		if errors.Is(err, ErrSessionLost) {
			p.err = err // no serving again: the reason is final
		}
		return
	}
	p.err = err
	l := p.local.Load()
	p.retired = append(p.retired, retiredPool{local: l, blocks: p.blocks})
	p.blocks, p.held = nil, 0
	fresh := atomicsem.MustNew(0, p.s.max)
	fresh.Close()
	p.local.Store(fresh)
	l.Close()
	if p.fetch != nil {
		p.fetch()
	}
}

// giveBackRetired gives back the blocks of retired local semaphores whose
// holders have all released.
func (p *Pool) giveBackRetired() {
	p.mu.Lock()
	var out []poolBlock
	kept := p.retired[:0]
	for _, r := range p.retired {
		if r.local == nil || r.local.Held() == 0 {
			out = append(out, r.blocks...)
			continue
		}
		kept = append(kept, r)
	}
	p.retired = kept
	p.mu.Unlock()
	p.releaseAsync(out)
}
