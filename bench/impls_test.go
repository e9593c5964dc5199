package bench_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sync/semaphore"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// sem is what every implementation under test offers the benchmarks. All of
// them, the subject included, are called through it, so the cost of the
// dynamic call is the same in every column.
type sem interface {
	// acquire blocks until n permits are recorded in h, or ctx is done.
	acquire(ctx context.Context, n int64, h *held) error
	// tryAcquire takes n permits into h without blocking and reports
	// whether it did.
	tryAcquire(n int64, h *held) bool
	// release gives back what h holds.
	release(h *held)
}

// limitSetter is implemented by the semaphores whose limit can move while
// permits are held.
type limitSetter interface {
	setLimit(limit int64)
}

// waiterCounter is implemented by the semaphores that can say how many
// acquirers are parked, so that a benchmark can wait for them exactly.
type waiterCounter interface {
	waiters() int
}

// held records what one acquire took. Each benchmark goroutine allocates one
// and reuses it, so the harness itself allocates nothing per operation.
//
// It is padded to 128 bytes, a size class whose objects start on a 128-byte
// boundary, so that no two goroutines' records share a cache line: the
// token's spent flag is written on every release, and false sharing between
// neighbouring records would bill the harness's layout to atomicsem.
type held struct {
	tok   token.Token                                   // atomicsem's, tokencas's and wordcas's token
	n     int64                                         // the others' count
	park  *parkWaiter                                   // floorpark's record, from its grant to its release
	guard floorGuard                                    // floorparkword's flag
	_     [128 - 24 - unsafe.Sizeof(token.Token{})]byte // the token is larger under -race
}

// impl names an implementation and builds one with limit permits available
// out of a ceiling of max (only atomicsem has a ceiling; the others use
// limit).
type impl struct {
	name string
	new  func(limit, max int64) sem
}

var impls = map[string]impl{
	"atomicsem": {"atomicsem", func(limit, max int64) sem {
		return newAtomicsem(limit, max)
	}},
	"atomicsem-barging": {"atomicsem-barging", func(limit, max int64) sem {
		return newAtomicsem(limit, max, atomicsem.WithBarging())
	}},
	"atomicsem-cache": {"atomicsem-cache", func(limit, max int64) sem {
		return newAtomicsem(limit, max, atomicsem.WithPermitCache())
	}},
	"xsyncsem": {"xsyncsem", func(limit, _ int64) sem {
		return xsyncSem{semaphore.NewWeighted(limit)}
	}},
	"chan": {"chan", func(limit, _ int64) sem {
		return &chanSem{ch: make(chan struct{}, limit)}
	}},
	"mutex": {"mutex", func(limit, _ int64) sem {
		c := &condSem{avail: limit}
		c.cond.L = &c.mu
		return c
	}},
	"floor": {"floor", func(limit, _ int64) sem {
		f := &floorSem{}
		f.v.Store(limit)
		return f
	}},
	"floorcas": {"floorcas", func(limit, _ int64) sem {
		f := &floorCASSem{}
		f.v.Store(limit)
		return f
	}},
	"floorpark": {"floorpark", func(limit, _ int64) sem {
		return &floorParkSem{count: limit}
	}},
	"floorparkword": {"floorparkword", func(limit, _ int64) sem {
		f := &floorParkWordSem{}
		f.word.Store(limit << 1)
		return f
	}},
	// tokencas and wordcas build up from floorcas towards atomicsem's fast
	// paths (tokencas_test.go).
	"tokencas": {"tokencas", func(limit, _ int64) sem {
		return tokenCASSem{newTokenCAS(limit)}
	}},
	"wordcas": {"wordcas", func(limit, max int64) sem {
		return wordCASSem{newWordCAS(limit, limit, max)}
	}},
	"syncmutex": {"syncmutex", func(limit, _ int64) sem {
		if limit != 1 {
			panic("syncmutex is a semaphore of one permit only")
		}
		return &mutexSem{}
	}},
	// ctxonly is no semaphore: see BenchmarkCancel.
	"ctxonly": {"ctxonly", nil},
}

// pick returns the named implementations in the given order, which is the
// order benchstat shows its columns in.
func pick(names ...string) []impl {
	out := make([]impl, len(names))
	for i, name := range names {
		im, ok := impls[name]
		if !ok {
			panic("unknown implementation " + name)
		}
		out[i] = im
	}
	return out
}

// atomicsemSem is the subject.
type atomicsemSem struct{ s *atomicsem.Semaphore }

func newAtomicsem(limit, max int64, opts ...atomicsem.Option) atomicsemSem {
	s, err := atomicsem.New(limit, max, opts...)
	if err != nil {
		panic(err)
	}
	return atomicsemSem{s}
}

func (a atomicsemSem) acquire(ctx context.Context, n int64, h *held) error {
	var err error
	h.tok, err = a.s.Acquire(ctx, n)
	return err
}

func (a atomicsemSem) tryAcquire(n int64, h *held) bool {
	var ok bool
	h.tok, ok = a.s.TryAcquire(n)
	return ok
}

func (a atomicsemSem) release(h *held) { h.tok.Release() }

func (a atomicsemSem) setLimit(limit int64) {
	if err := a.s.SetLimit(limit); err != nil {
		panic(err)
	}
}

func (a atomicsemSem) waiters() int { return a.s.Stats().Waiters }

// xsyncSem is golang.org/x/sync/semaphore.Weighted, the usual choice. Its
// impl name is xsyncsem, not to be confused with github.com/puzpuzpuz/xsync.
type xsyncSem struct{ w *semaphore.Weighted }

func (x xsyncSem) acquire(ctx context.Context, n int64, h *held) error {
	h.n = n
	return x.w.Acquire(ctx, n)
}

func (x xsyncSem) tryAcquire(n int64, h *held) bool {
	h.n = n
	return x.w.TryAcquire(n)
}

func (x xsyncSem) release(h *held) { x.w.Release(h.n) }

// chanSem is a buffered channel: a send takes a permit, a receive returns
// one. A request for several permits sends once per permit while holding
// multi, so that two of them can never each hold part of what the other
// needs and deadlock; single-permit requests do not take the lock.
type chanSem struct {
	ch    chan struct{}
	multi sync.Mutex
}

func (c *chanSem) acquire(ctx context.Context, n int64, h *held) error {
	h.n = n
	done := ctx.Done()
	if n == 1 {
		select {
		case c.ch <- struct{}{}:
			return nil
		case <-done:
			return ctx.Err()
		}
	}
	c.multi.Lock()
	defer c.multi.Unlock()
	for i := int64(0); i < n; i++ {
		select {
		case c.ch <- struct{}{}:
		case <-done:
			c.drain(i)
			return ctx.Err()
		}
	}
	return nil
}

func (c *chanSem) tryAcquire(n int64, h *held) bool {
	h.n = n
	if n == 1 {
		select {
		case c.ch <- struct{}{}:
			return true
		default:
			return false
		}
	}
	if !c.multi.TryLock() {
		return false
	}
	defer c.multi.Unlock()
	for i := int64(0); i < n; i++ {
		select {
		case c.ch <- struct{}{}:
		default:
			c.drain(i)
			return false
		}
	}
	return true
}

func (c *chanSem) release(h *held) { c.drain(h.n) }

func (c *chanSem) drain(n int64) {
	for i := int64(0); i < n; i++ {
		<-c.ch
	}
}

// condSem is the textbook semaphore: a counter under a sync.Mutex, with a
// sync.Cond to wait on. A release broadcasts, because with weighted requests
// a single signal can wake a waiter that still does not fit while one that
// would fit sleeps on. A waiter with a cancellable ctx registers a
// context.AfterFunc that broadcasts, since a Cond cannot select on ctx.
type condSem struct {
	mu    sync.Mutex
	cond  sync.Cond
	avail int64
}

func (c *condSem) acquire(ctx context.Context, n int64, h *held) error {
	h.n = n
	c.mu.Lock()
	if c.avail >= n {
		c.avail -= n
		c.mu.Unlock()
		return nil
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			c.mu.Lock()
			c.cond.Broadcast()
			c.mu.Unlock()
		})
		defer stop()
	}
	for c.avail < n {
		if err := ctx.Err(); err != nil {
			c.mu.Unlock()
			return err
		}
		c.cond.Wait()
	}
	c.avail -= n
	c.mu.Unlock()
	return nil
}

func (c *condSem) tryAcquire(n int64, h *held) bool {
	h.n = n
	c.mu.Lock()
	ok := c.avail >= n
	if ok {
		c.avail -= n
	}
	c.mu.Unlock()
	return ok
}

func (c *condSem) release(h *held) {
	c.mu.Lock()
	c.avail += h.n
	c.cond.Broadcast()
	c.mu.Unlock()
}

// floorSem is the least any one-word semaphore can do: a compare-and-swap
// loop to take permits and an atomic add to return them, with no fairness,
// no flags, no guard and no way to park. Its acquire spins, so it runs only
// in benchmarks where it never has to wait.
type floorSem struct{ v atomic.Int64 }

func (f *floorSem) acquire(_ context.Context, n int64, h *held) error {
	for !f.tryAcquire(n, h) {
		runtime.Gosched()
	}
	return nil
}

func (f *floorSem) tryAcquire(n int64, h *held) bool {
	h.n = n
	for {
		old := f.v.Load()
		if old < n {
			return false
		}
		if f.v.CompareAndSwap(old, old-n) {
			return true
		}
	}
}

func (f *floorSem) release(h *held) { f.v.Add(h.n) }

// floorCASSem is floorSem with a release that is a compare-and-swap loop
// too (load, add, CAS) rather than an atomic add: the floor of a one-word
// semaphore whose word changes only by compare-and-swap, as atomicsem's
// does. It differs from floor by the load before the release's CAS.
type floorCASSem struct{ floorSem }

func (f *floorCASSem) release(h *held) {
	for {
		old := f.v.Load()
		if f.v.CompareAndSwap(old, old+h.n) {
			return
		}
	}
}

// floorGuard is floorparkword's guard: a plain flag, written fresh when the
// permits are taken and checked and set when they are returned, as
// token.Token's is, since a guard belongs to one goroutine at a time.
type floorGuard struct{ spent bool }

// end marks the guard spent; it panics, naming the floor, if it was already.
func (g *floorGuard) end(floor string) {
	if g.spent {
		panic(floor + ": released twice")
	}
	g.spent = true
}

// floorParkSem is the least any FIFO semaphore that parks each waiter on a
// channel of its own and hands released permits straight to the front
// waiter can do: a sync.Mutex over a count and an intrusive queue of waiter
// records, each with a channel of one slot that the waiter receives from,
// beside ctx.Done() when ctx can be cancelled. It has no state word to try
// before the lock, no guard, no barging and no limit to move. Records go
// round through a free list under the same mutex together with their
// channels, so it allocates nothing once the list holds as many records as
// ever wait at once. A request for more than the limit would wait at the
// front for ever and block everyone behind it, so it runs only in benchmarks
// that never make one.
type floorParkSem struct {
	mu    sync.Mutex
	count int64 // free permits; guarded by mu
	parkQueue
}

// parkQueue is the queue of floorpark and floorparkword, with its free
// list. All of it is guarded by the semaphore's mu.
type parkQueue struct {
	head, tail *parkWaiter   // the queue, oldest first
	free       []*parkWaiter // records no acquire is using
}

// parkWaiter is a parked acquire of floorParkSem.
type parkWaiter struct {
	prev, next *parkWaiter // queue links; guarded by mu
	n          int64
	queued     bool          // guarded by mu; cleared when granted or withdrawn
	ready      chan struct{} // one slot, filled under mu by the grant
}

func (f *floorParkSem) acquire(ctx context.Context, n int64, h *held) error {
	h.n = n
	done := ctx.Done()
	if done != nil {
		// A done ctx fails even with permits free, as atomicsem's does.
		select {
		case <-done:
			return ctx.Err()
		default:
		}
	}
	f.mu.Lock()
	// FIFO: nobody takes permits while anyone is queued.
	if f.head == nil && f.count >= n {
		f.count -= n
		f.mu.Unlock()
		return nil
	}
	w := f.parkLocked(n)
	f.mu.Unlock()
	if done == nil {
		<-w.ready
		h.park = w
		return nil
	}
	select {
	case <-w.ready:
		h.park = w
		return nil
	case <-done:
		f.withdraw(w)
		return ctx.Err()
	}
}

func (f *floorParkSem) tryAcquire(n int64, h *held) bool {
	h.n = n
	f.mu.Lock()
	ok := f.head == nil && f.count >= n
	if ok {
		f.count -= n
	}
	f.mu.Unlock()
	return ok
}

func (f *floorParkSem) release(h *held) {
	f.mu.Lock()
	if w := h.park; w != nil {
		// The waiter emptied its channel before it returned, so its record
		// is free. It goes back under the lock this release takes anyway,
		// rather than under one more taken on waking.
		h.park = nil
		f.free = append(f.free, w)
	}
	f.count += h.n
	f.grantLocked()
	f.mu.Unlock()
}

// waiters counts the queue; only benchmark set-up calls it, so the hot
// paths keep no counter for it.
func (f *floorParkSem) waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lenLocked()
}

// lenLocked counts the queue. It requires the semaphore's mu.
func (f *parkQueue) lenLocked() int {
	k := 0
	for w := f.head; w != nil; w = w.next {
		k++
	}
	return k
}

// parkLocked queues a record for n permits at the back and returns it.
// It requires the semaphore's mu.
func (f *parkQueue) parkLocked(n int64) *parkWaiter {
	var w *parkWaiter
	if k := len(f.free); k > 0 {
		w = f.free[k-1]
		f.free = f.free[:k-1]
	} else {
		w = &parkWaiter{ready: make(chan struct{}, 1)}
	}
	w.n, w.queued = n, true
	w.prev, w.next = f.tail, nil
	if f.tail != nil {
		f.tail.next = w
	} else {
		f.head = w
	}
	f.tail = w
	return w
}

// grantLocked hands permits to the front waiters in order for as long as
// they fit; the first that does not fit holds back those behind it. It
// requires that f.mu is held.
func (f *floorParkSem) grantLocked() {
	for w := f.head; w != nil && w.n <= f.count; w = f.head {
		f.count -= w.n
		f.unlinkLocked(w)
		w.ready <- struct{}{}
	}
}

// withdraw takes back w, whose ctx is done, and leaves the semaphore as if
// it had never queued: a grant that came first is returned as a release
// would return it. Either way those behind w may fit now.
func (f *floorParkSem) withdraw(w *parkWaiter) {
	f.mu.Lock()
	if w.queued {
		f.unlinkLocked(w)
	} else {
		// Granted: the grant filled the slot under mu before clearing
		// queued, so this receive never blocks, and it leaves the channel
		// empty for the record's next use.
		<-w.ready
		f.count += w.n
	}
	f.free = append(f.free, w)
	f.grantLocked()
	f.mu.Unlock()
}

// unlinkLocked takes w off the queue. It requires the semaphore's mu.
func (f *parkQueue) unlinkLocked(w *parkWaiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		f.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		f.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
}

// floorParkWordSem is floorpark with the token's guard, with its acquire
// one call further down (the waiter parks inside a function that the
// adapter calls and returns through it when woken, as it does through a
// library's Acquire), and with what lets atomicsem's arrivals and releases
// pass the lock by while nobody is queued: the free count lives
// in an atomic word beside a queued flag, and an acquire or a release first
// tries one CAS on the word, taking the lock only when the flag is set (or,
// for an acquire, the permits are short). The flag is set under the lock
// before a waiter queues and cleared under it when the queue empties, so
// while it is set only the lock's holder writes the word, and a hand-off
// that leaves the count as it was does not write it at all. It has no limit
// to move, no waiters above the limit to step over, no queue counter and no
// barging: the least a FIFO semaphore with lock-free arrivals beside a queue
// of channel-parked waiters, and with guarded tokens, can do.
type floorParkWordSem struct {
	word atomic.Int64 // free permits << 1 | wordQueued
	mu   sync.Mutex
	parkQueue
}

// wordQueued is floorparkword's flag: set exactly while the queue is not
// empty (as seen under mu).
const wordQueued = 1

func (f *floorParkWordSem) acquire(ctx context.Context, n int64, h *held) error {
	err := f.take(ctx, n, h) // too large to inline: a call, as Acquire is
	h.guard = floorGuard{}
	return err
}

func (f *floorParkWordSem) take(ctx context.Context, n int64, h *held) error {
	h.n = n
	done := ctx.Done()
	if done != nil {
		select {
		case <-done:
			return ctx.Err()
		default:
		}
	}
	if f.takeFree(n) {
		return nil
	}
	f.mu.Lock()
	for {
		old := f.word.Load()
		if old&wordQueued == 0 && old>>1 >= n {
			if f.word.CompareAndSwap(old, old-n<<1) {
				f.mu.Unlock()
				return nil
			}
			continue
		}
		// FIFO: queue behind anyone queued, and set the flag before
		// queueing, so that lock-free arrivals and releases stop.
		if old&wordQueued != 0 || f.word.CompareAndSwap(old, old|wordQueued) {
			break
		}
	}
	w := f.parkLocked(n)
	f.mu.Unlock()
	// The wait is written out here, as in floorpark, not shared through a
	// function: a woken goroutine pays for each frame it returns through,
	// since its stack and return addresses are cold after the switch, and a
	// floor must not pay for a frame that atomicsem's Acquire does not have.
	if done == nil {
		<-w.ready
		h.park = w
		return nil
	}
	select {
	case <-w.ready:
		h.park = w
		return nil
	case <-done:
		f.withdraw(w)
		return ctx.Err()
	}
}

// takeFree takes n permits by CAS unless someone is queued or fewer are free.
func (f *floorParkWordSem) takeFree(n int64) bool {
	for {
		old := f.word.Load()
		if old&wordQueued != 0 || old>>1 < n {
			return false
		}
		if f.word.CompareAndSwap(old, old-n<<1) {
			return true
		}
	}
}

func (f *floorParkWordSem) tryAcquire(n int64, h *held) bool {
	h.n = n
	if !f.takeFree(n) {
		return false
	}
	h.guard = floorGuard{}
	return true
}

func (f *floorParkWordSem) release(h *held) {
	h.guard.end("floorparkword")
	if h.park == nil { // a parked acquire's record goes back under the lock
		for {
			old := f.word.Load()
			if old&wordQueued != 0 {
				break
			}
			if f.word.CompareAndSwap(old, old+h.n<<1) {
				return
			}
		}
	}
	f.mu.Lock()
	if w := h.park; w != nil {
		h.park = nil
		f.free = append(f.free, w)
	}
	f.returnLocked(h.n)
	f.mu.Unlock()
}

// returnLocked makes n permits free and hands what is free to the front
// waiters in order while they fit. It requires that f.mu is held.
func (f *floorParkWordSem) returnLocked(n int64) {
	old := f.word.Load()
	if old&wordQueued == 0 {
		// Nobody queued, and lock-free callers may be changing the word.
		f.word.Add(n << 1)
		return
	}
	// Only the holder of mu writes the word while the flag is set.
	count := old>>1 + n
	for w := f.head; w != nil && w.n <= count; w = f.head {
		count -= w.n
		f.unlinkLocked(w)
		w.ready <- struct{}{}
	}
	next := count << 1
	if f.head != nil {
		next |= wordQueued
	}
	if next != old {
		f.word.Store(next)
	}
}

// withdraw takes back w, whose ctx is done, as floorpark's does.
func (f *floorParkWordSem) withdraw(w *parkWaiter) {
	f.mu.Lock()
	var n int64
	if w.queued {
		f.unlinkLocked(w)
	} else {
		<-w.ready // granted: see floorParkSem.withdraw
		n = w.n
	}
	f.free = append(f.free, w)
	f.returnLocked(n) // also clears the flag if w was the last queued
	f.mu.Unlock()
}

func (f *floorParkWordSem) waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lenLocked()
}

// mutexSem is a bare sync.Mutex: the reference for a semaphore of one
// permit under contention, where barging lets it skip most hand-offs. It
// ignores ctx.
type mutexSem struct{ mu sync.Mutex }

func (m *mutexSem) acquire(context.Context, int64, *held) error {
	m.mu.Lock()
	return nil
}

func (m *mutexSem) tryAcquire(int64, *held) bool { return m.mu.TryLock() }

func (m *mutexSem) release(*held) { m.mu.Unlock() }
