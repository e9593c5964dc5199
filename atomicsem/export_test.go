package atomicsem

import (
	"fmt"
	"slices"
	"unsafe"
)

// QueueFlagsError checks invariants I6 and I9 of the state word (see
// internal/state): with the queue lock free, the queue state is queued or
// higher iff the queue is non-empty, eligible or higher iff a queued waiter
// asks for no more than the limit and, in barging mode unless starving, no
// woken waiter is on its way; the idle flag is set iff WaitIdle callers
// wait, and never with nothing held; and the word's own invariants
// (CheckInvariants). It returns a description of the first mismatch, or ""
// if there is none. It takes the lock, so it sees the queue between two
// operations.
func QueueFlagsError(s *Semaphore) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.load()
	eligible := false
	for q := s.queue.head; q != nil; q = q.next {
		eligible = eligible || q.want() <= w.Limit()
	}
	eligible = eligible && (w.Starving() || s.queue.woken == 0)
	switch {
	case s.queue.woken < 0 || (!s.barging() && s.queue.woken != 0):
		return fmt.Sprintf("%d woken waiters on their way", s.queue.woken)
	case w.Queued() != !s.queue.empty():
		return "queued flag disagrees with the queue"
	case w.Eligible() != eligible:
		return "eligible flag disagrees with the queue and the limit"
	case w.Idle() != (len(s.idle.chans) > 0):
		return "idle flag disagrees with the WaitIdle callers"
	case w.Idle() && w.Held() == 0:
		return "idle flag set with no permit held"
	}
	return w.CheckInvariants(s.max)
}

// WordStats returns the fields of Stats that come from the state word,
// leaving Waiters zero, without the queue lock that Stats takes: for a test
// that has stopped a goroutine at a hook while it holds the lock.
func WordStats(s *Semaphore) Stats {
	return s.statsOf(s.load(), 0)
}

// LockQueue takes the semaphore's queue lock and returns the function that
// releases it, so that a test can show that a call does not need it.
func LockQueue(s *Semaphore) (unlock func()) {
	s.mu.Lock()
	return s.mu.Unlock
}

// FreeListError checks the free list of waiter records: no record listed
// twice (two parked Acquires would then share one record and its event) and
// a length that matches the count. It returns a description of the first
// problem, or "" if there is none. It takes the queue lock.
func FreeListError(s *Semaphore) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[*waiter]bool)
	for _, head := range []*waiter{s.free.head, s.free.spill.Load()} {
		for w := head; w != nil; w = w.next {
			if seen[w] {
				return "a waiter record is on the free list twice"
			}
			seen[w] = true
		}
	}
	if want := s.free.len + int(s.free.spillLen.Load()); len(seen) != want {
		return fmt.Sprintf("%d records on the free list, but its lengths say %d", len(seen), want)
	}
	return ""
}

// ForceSpinning makes barging arrivals spin before they queue, as they do on
// a machine with more than one CPU, until restore is called; for a test that
// must see the spin on any machine.
func ForceSpinning() (restore func()) {
	old := multicore
	multicore = true
	return func() { multicore = old }
}

// QueueState returns the word's queue state, by name: "empty", "queued",
// "eligible" or "starving", without the queue lock.
func QueueState(s *Semaphore) string {
	return [...]string{"empty", "queued", "eligible", "starving"}[s.load().Queue()]
}

// TinyCache shrinks the permit cache of s, made WithPermitCache, to blocks
// of one permit with no reserve, and turns it on whenever a permit is free
// and the word allows it: so that tests of small semaphores go through
// the cache, and through turning it on and off, as often as possible.
func TinyCache(s *Semaphore) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cache
	c.block, c.reserve, c.enableAt = 1, 0, 1
	if w := s.load(); !c.on && s.mayCacheLocked(w) && w.Available() >= c.enableAt {
		c.on = true
		for i := range c.stripes {
			c.stripes[i].word.Store(0)
		}
	}
}

// CacheOn reports whether the stripes of s's permit cache are on.
func CacheOn(s *Semaphore) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cache != nil && s.cache.on
}

// CacheError checks the permit cache's invariants (see cache.go), under
// the queue lock: C1, the stripes are off while a waiter is queued, a
// WaitIdle caller waits or the semaphore is closed; C2, an off stripe
// holds no permits; and the stripes agree with the flag that says they
// are on, and hold no more than the word counts as held. It returns a
// description of the first problem, or "".
//
// The lock stops the stripes turning on or off, but not the lock-free
// paths, which go on moving permits while it is held: a refill counts its
// block as held in the word and then puts it in its stripe, and a token
// takes permits from a stripe and may give them back to the word. So the
// count of cached permits is compared with a word read between two reads
// of the stripes that agree stripe by stripe; a check that finds them
// moving every time it tries leaves that comparison out.
func CacheError(s *Semaphore) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cache
	if c == nil {
		return ""
	}
	w := s.load()
	for i := range c.stripes {
		v := c.stripes[i].word.Load()
		switch {
		case v&stripeOff != 0 && v != stripeOff:
			return fmt.Sprintf("C2: stripe %d is off and holds %d permits", i, v&^stripeOff)
		case (v&stripeOff != 0) == c.on:
			return fmt.Sprintf("stripe %d is %s while the cache is %s", i, onOff(v&stripeOff == 0), onOff(c.on))
		}
	}
	if c.on && (!s.queue.empty() || s.queue.woken > 0 || w.Idle() || w.Closed()) {
		return "C1: the stripes are on with a waiter queued or woken, a WaitIdle caller or the semaphore closed"
	}
	before, after := make([]uint64, len(c.stripes)), make([]uint64, len(c.stripes))
	for range 100 {
		for i := range c.stripes {
			before[i] = c.stripes[i].word.Load()
		}
		w = s.load()
		for i := range c.stripes {
			after[i] = c.stripes[i].word.Load()
		}
		if !slices.Equal(before, after) {
			continue
		}
		var cached int64
		for _, v := range before {
			cached += int64(v &^ stripeOff)
		}
		if cached > w.Held() {
			return fmt.Sprintf("the stripes hold %d permits, the word counts %d held", cached, w.Held())
		}
		return ""
	}
	return ""
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// StripeLayout returns the size of a stripe of s's permit cache and the
// address of its first stripe.
func StripeLayout(s *Semaphore) (size, addr uintptr) {
	return unsafe.Sizeof(stripe{}), uintptr(unsafe.Pointer(&s.cache.stripes[0]))
}

// CacheSizes returns the block a stripe of s's permit cache draws and the
// reserve below which it draws no block.
func CacheSizes(s *Semaphore) (block, reserve int64) {
	return s.cache.block, s.cache.reserve
}
