package atomicsem

import (
	"math/bits"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/atomicsem/atomicsem/internal/hook"
	"github.com/atomicsem/atomicsem/internal/state"
	"github.com/atomicsem/atomicsem/token"
)

// The permit cache (WithPermitCache).
//
// Implementation details. Every acquire and release of a plain semaphore
// changes the one word, so with many cores at work the word's cache line
// moves between them on every operation, whatever else is done. A
// semaphore made WithPermitCache keeps, besides the word, an array of
// stripes, each a counter of free permits on a cache line of its own. A
// goroutine takes permits from its home stripe (chosen by a hash of the
// address of its stack, so a goroutine keeps its stripe while it runs),
// and the token it gets carries the stripe's index, so that its Release
// puts the permits back where they came from. While nobody waits, most
// acquires and releases touch only the home stripe's line, which stays in
// the cache of the core that runs the goroutine.
//
// Permits in a stripe were taken from the word: the word counts them as
// held, together with the permits of live tokens. So the word's own
// checks still bound everything handed out: no more than the limit is
// ever held by tokens, because tokens and stripes together hold at most
// what the word admitted.
//
// The stripes are on (the cached mode) or off (the exact mode). In the
// exact mode every stripe is empty, and every operation goes to the word,
// exactly as in a semaphore without a cache. The stripes are turned off,
// and their permits returned to the word, under the queue lock, by every
// operation whose answer depends on knowing where every permit is:
//
//   - an Acquire that the word cannot serve, before it queues, so that no
//     waiter ever parks beside cached permits, and waiters keep the
//     semaphore's order (FIFO or barging) among themselves whatever core
//     they arrived on;
//   - a TryAcquire or TryForget that the word cannot serve, before it
//     fails, so that it fails only when the permits are not there;
//   - SetLimit, before it moves the limit: a lower limit must not leave
//     cached permits for acquirers to take beyond it;
//   - WaitIdle, before it looks at what is held, and Close.
//
// So while anyone is queued (or, in barging mode, woken and on its way to
// queue again), a WaitIdle caller waits, or the semaphore is closed, the
// stripes are off (invariant C1, checked by CacheError), and everything
// the rest of the package says about the word holds as it is. They are
// turned on again, under the lock, by a release that leaves at least
// enableAt permits free in the word when C1 allows it. enableAt is twice
// what the stripes may draw at once, so that a semaphore working near its
// limit stays in the exact mode rather than turning the stripes on and
// off. No timer or goroutine empties idle stripes: a stripe keeps at most
// twice its block, and whoever needs what the stripes hold turns them
// off.
//
// A stripe that lacks the permits asked for draws them from the word, with
// a block of block more to keep if the word has at least reserve left
// after it; near the limit it draws only what was asked for. A release
// that would take its stripe above twice block returns the permits to the
// word instead.
//
// Each stripe's word holds its free permits, and stripeOff while the
// stripe is off. An off stripe holds no permits (C2); turning stripes off
// swaps stripeOff in and takes what they held, so a lock-free operation
// that loaded the stripe before fails its CAS and, loading it again, finds
// it off and goes to the word.

// WithPermitCache keeps free permits in per-CPU caches, so that, while
// nobody waits, acquires and releases on different cores do not contend
// for one word: for a large limit (thousands of permits) checked on every
// request of a server with many cores. It costs a cache line per stripe,
// about two per CPU, for each semaphore so made.
//
// What the cache keeps: tokens never hold more than the limit; SetLimit,
// Close and WaitIdle are exact, and so are TryAcquire's and TryForget's
// refusals, because each first returns every cached permit to the shared
// count, and the caches stay empty while anyone waits, so parked waiters
// keep their order. What it gives up: Stats and Held count the cached
// permits as available by reading every cache after the shared count,
// which is exact at rest but may be off by the permits that moved
// meanwhile; permits that a refill is moving from the shared count into a
// cache, for the few instructions that takes, count as held, so a
// TryAcquire racing it may fail and a WaitIdle wait for it; and near the
// limit, or when the limit is small, the caches turn themselves off and
// the semaphore costs what one without them does.
func WithPermitCache() Option {
	return func(c *config) { c.cache = true }
}

// stripeOff marks a stripe that is off.
const stripeOff = 1 << 63

// cacheLineSize is the width of a cache line on the processors the stripes
// are padded for (amd64 and arm64 servers).
const cacheLineSize = 64

// stripe is one cache of free permits, alone on its cache line, so that
// cores working on different stripes do not contend for a line.
type stripe struct {
	word atomic.Uint64 // free permits, with stripeOff while the stripe is off
	_    [cacheLineSize - 8]byte
}

// permitCache is a semaphore's array of stripes and its sizes. Only on is
// ever written after New.
type permitCache struct {
	stripes  []stripe
	mask     uint32 // len(stripes) − 1, a power of two less one
	block    int64  // the permits a refill keeps in its stripe
	full     int64  // a release that would leave its stripe above this returns to the word
	reserve  int64  // a refill keeps a block only if the word has this many left
	enableAt int64  // the stripes go on once the word has this many free
	on       bool   // the stripes are on; guarded by mu
}

// newPermitCache returns the cache of a semaphore of maximum max: two
// stripes per P, rounded up to a power of two. Its block is a sixteenth
// of what each stripe's share of max would be, at least one.
func newPermitCache(max int64) *permitCache {
	n := 1 << bits.Len(uint(2*runtime.GOMAXPROCS(0)-1))
	block := max / int64(16*n)
	if block < 1 {
		block = 1
	}
	return &permitCache{
		stripes:  make([]stripe, n),
		mask:     uint32(n - 1),
		block:    block,
		full:     2 * block,
		reserve:  int64(n) * block,
		enableAt: 2 * int64(n) * block,
	}
}

// home returns the index of the calling goroutine's stripe: a hash of the
// address of a variable on its stack, to 2 KiB. Goroutine stacks are at
// least 2 KiB long and start on a 2 KiB boundary, so goroutines running at
// once hash different addresses, and a goroutine keeps its stripe from call to
// call while its stack stays where it is (a deeper call may land in the
// next 2 KiB, and so on another stripe, which costs only that stripe's
// block); a collision only makes two goroutines share a stripe. It costs a
// multiplication, where a per-P index would need the runtime's help.
func (c *permitCache) home() uint32 {
	var here byte
	h := uint64(uintptr(unsafe.Pointer(&here))>>11) * 0x9e3779b97f4a7c15
	return uint32(h>>32) & c.mask
}

// cacheOwner is the semaphore as the owner of the tokens its cache hands
// out; a token's tag is the index of the stripe its permits return to.
type cacheOwner Semaphore

// ReturnPermits implements token.Owner: the permits go back to their
// stripe while it is on and has room, and to the word otherwise.
func (o *cacheOwner) ReturnPermits(n int64, tag uint32) {
	s := (*Semaphore)(o)
	c := s.cache
	st := &c.stripes[tag&c.mask]
	for {
		old := st.word.Load()
		if old&stripeOff != 0 || int64(old)+n > c.full {
			break
		}
		if st.word.CompareAndSwap(old, old+uint64(n)) {
			return
		}
	}
	s.returnToWord(n)
}

// ForgetPermits implements token.Owner: the word counts the permits as
// held, so forgetting them is the word's Forget.
func (o *cacheOwner) ForgetPermits(n int64, _ uint32) { (*Semaphore)(o).forgetPermits(n) }

// SplitPermits implements token.Owner: both parts return to the stripe.
func (o *cacheOwner) SplitPermits(_, _ int64, tag uint32) (token.Owner, uint32) { return o, tag }

// cachedTokenFor returns a token for n permits that return to stripe home.
func (s *Semaphore) cachedTokenFor(n int64, home uint32) token.Token {
	return token.New((*cacheOwner)(s), n, home)
}

// take takes n free permits from st if it is on and has them, in one
// CAS, and reports whether it did; it is small enough to be inlined into
// Acquire and TryAcquire, which call it first, with the calling
// goroutine's home stripe, and acquireCachedSlow after it.
func (st *stripe) take(n int64) bool {
	old := st.word.Load()
	return old&stripeOff == 0 && int64(old) >= n && st.word.CompareAndSwap(old, old-uint64(n))
}

// acquireCachedSlow is the rest of the permit cache's fast path, after
// take has failed on st, the calling goroutine's home stripe: it tries
// the stripe again while it has the permits and is on (another goroutine
// sharing it won the CAS), and otherwise draws them from the word (see
// refill). It reports false, having taken nothing, if it cannot take n
// without the queue lock: the caller's slow path then turns the stripes
// off and asks the word. It requires 0 < n ≤ MaxPermits.
func (s *Semaphore) acquireCachedSlow(st *stripe, n int64) bool {
	for {
		old := st.word.Load()
		if old&stripeOff != 0 || int64(old) < n {
			return s.refill(st, n)
		}
		if st.word.CompareAndSwap(old, old-uint64(n)) {
			return true
		}
	}
}

// refill takes n permits from the word for an acquire whose stripe st
// lacks them (or is off), and, while the stripes are on and the word keeps
// its reserve, a block more for st. It reports whether it took them.
func (s *Semaphore) refill(st *stripe, n int64) bool {
	c := s.cache
	var keep int64
	for {
		old := s.load()
		keep = 0
		if st.word.Load()&stripeOff == 0 && old.Available()-n-c.block >= c.reserve {
			keep = c.block
		}
		held := old.Held() + n + keep
		if old >= s.block || held > old.Limit() {
			return false
		}
		hook.At(hook.BeforeCAS)
		if s.cas(old, old.WithHeld(held)) {
			break
		}
	}
	if keep == 0 {
		return true
	}
	for {
		old := st.word.Load()
		if old&stripeOff != 0 {
			// Turned off since: the block goes back to the word, which
			// may have waiters to serve by now.
			s.returnToWord(keep)
			return true
		}
		if st.word.CompareAndSwap(old, old+uint64(keep)) {
			return true
		}
	}
}

// returnToWord returns n held permits to the word, as a plain semaphore's
// token does; then, if the stripes are off and the word has room enough
// again, it turns them on.
func (s *Semaphore) returnToWord(n int64) {
	if !s.releaseFast(n) {
		s.releaseSlow(n, nil)
		return
	}
	if w := s.load(); w < state.BlockLimitMove && !w.Idle() && w.Available() >= s.cache.enableAt &&
		s.cache.stripes[0].word.Load()&stripeOff != 0 {
		s.enableCache()
	}
}

// enableCache turns the stripes on, if the word still allows it when the
// queue lock is free; a caller that finds the lock taken leaves it to a
// later release.
func (s *Semaphore) enableCache() {
	if !s.mu.TryLock() {
		return
	}
	c := s.cache
	if w := s.load(); !c.on && s.mayCacheLocked(w) && w.Available() >= c.enableAt {
		c.on = true
		for i := range c.stripes {
			c.stripes[i].word.Store(0) // from stripeOff: an off stripe is empty
		}
	}
	s.mu.Unlock()
}

// mayCacheLocked reports whether the stripes may be on beside w, the
// current word: nobody is queued or, in barging mode, woken and on the way
// to queue again, no WaitIdle caller waits, and the semaphore is open
// (invariant C1). It requires that s.mu is held.
func (s *Semaphore) mayCacheLocked(w state.Word) bool {
	return w < state.BlockLimitMove && !w.Idle() && s.queue.woken == 0
}

// drainLocked turns the stripes off and returns their permits to the word,
// serving the queue with them; it does nothing for a semaphore without a
// cache or with the stripes off. It requires that s.mu is held.
func (s *Semaphore) drainLocked() {
	c := s.cache
	if c == nil || !c.on {
		return
	}
	c.on = false
	var free int64
	for i := range c.stripes {
		free += int64(c.stripes[i].word.Swap(stripeOff) &^ stripeOff)
	}
	if free > 0 {
		s.releaseLocked(free)
	}
}

// cached returns the permits the stripes hold, read one stripe after
// another: exact only while no cache operation runs.
func (s *Semaphore) cached() int64 {
	var free int64
	for i := range s.cache.stripes {
		free += int64(s.cache.stripes[i].word.Load() &^ stripeOff)
	}
	return free
}

// tryAcquireCached is TryAcquire for a semaphore with a permit cache and
// 0 < n ≤ MaxPermits, after take has failed on home, the calling
// goroutine's stripe: the rest of the cache's fast path, and, if that
// fails with the stripes on, the word once more after they are drained,
// so that it fails only when n are not there.
func (s *Semaphore) tryAcquireCached(n int64, home uint32) (token.Token, bool) {
	c := s.cache
	if s.acquireCachedSlow(&c.stripes[home], n) {
		return s.cachedTokenFor(n, home), true
	}
	if c.stripes[0].word.Load()&stripeOff != 0 {
		// The stripes are off (or were just turned off): the word holds
		// every free permit, and refill has asked it already, but
		// a drain may have returned permits to it since.
		if s.acquireFast(n) {
			return s.tokenFor(n), true
		}
		return token.Token{}, false
	}
	s.mu.Lock()
	wasOn := c.on
	s.drainLocked()
	s.mu.Unlock()
	if !wasOn {
		return token.Token{}, false
	}
	if s.acquireFast(n) {
		return s.tokenFor(n), true
	}
	return token.Token{}, false
}
