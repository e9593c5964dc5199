package atomicsem

import (
	"time"

	"go.uber.org/atomic"

	"github.com/atomicsem/atomicsem/event"
	"github.com/atomicsem/atomicsem/internal/mutant"
)

// waitStatus says how a parked waiter's wait ended. It is written under the
// semaphore's mu before the waiter's event is set, so the waiter may read it
// without the lock once it has consumed the event.
type waitStatus uint8

const (
	waiting waitStatus = iota // queued, nothing decided
	granted                   // the permits were handed to the waiter
	woken                     // barging mode: permits are free, compete for them
	closed                    // Close ran; the waiter gets ErrClosed
)

// waiter is a parked Acquire. Each semaphore keeps a free list of waiter
// records, so parking allocates nothing in steady state.
//
// A waiter granted its permits by hand-off keeps its record until it
// releases them: the record becomes its token's owner (see grantedOwner),
// and the Release, which takes the queue lock to hand the permits on in any
// case while others wait, puts the record back on the free list under that
// lock. So in the contended case the free list costs no atomic operations.
//
// A parked Acquire costs this record plus its event's channel, so the record
// is kept small: the arrival time is one int64 rather than a time.Time (24
// bytes), the request is an int32 (requests are at most MaxPermits, 2^20 − 1)
// and status, the only other field narrower than a word, sits beside it. On
// 64-bit platforms the record is 45 bytes, which the allocator rounds to its
// 48-byte size class.
type waiter struct {
	prev, next *waiter    // queue links, or the free-list link; guarded by mu
	sem        *Semaphore // the semaphore whose free list the record belongs to
	arrival    int64      // when first queued, as nanoseconds since epoch; barging mode only
	ready      event.AutoReset
	n          int32      // permits requested
	status     waitStatus // guarded by mu; see waitStatus
}

// want returns the number of permits w requested.
func (w *waiter) want() int64 { return int64(w.n) }

// epoch is the origin of waiter arrival times. time.Since(epoch) reads the
// monotonic clock, so waiting times are immune to changes of the wall clock.
// (In a testing/synctest bubble, time.Since reads the bubble's fake clock,
// without a monotonic reading; differences of two such readings taken in one
// bubble are still exact.)
var epoch = time.Now()

// waitedFor returns how long w has waited since its arrival was stamped.
func (w *waiter) waitedFor() time.Duration {
	return time.Since(epoch) - time.Duration(w.arrival)
}

// maxFreeWaiters caps a semaphore's free list. Records beyond it are left to
// the garbage collector, so a burst of parked goroutines does not pin its
// peak memory for the semaphore's lifetime.
const maxFreeWaiters = 1024

// waiterFreeList recycles waiter records together with their events'
// channels. It is per semaphore rather than a global sync.Pool because a
// channel made inside a testing/synctest bubble must not be used outside it:
// a shared pool would hand one test's channel to another.
//
// Records come back under the semaphore's mu, onto a plain stack, except
// when a token's Release finds mu busy: that release does not wait, and
// pushes the record onto spill, a lock-free stack, instead. Records are
// taken only under mu, from the plain stack first. With that single
// consumer no record can leave spill and come back between a pop's load and
// its CAS, so spill is free of the ABA problem. The plain stack keeps at
// most maxFreeWaiters records, spill about as many (see putSpill).
type waiterFreeList struct {
	head *waiter // guarded by mu
	len  int     // guarded by mu

	spill    atomic.Pointer[waiter]
	spillLen atomic.Int32 // approximate: only enforces maxFreeWaiters
}

// getLocked returns a record of s for n permits, recycled if one is free.
func (l *waiterFreeList) getLocked(s *Semaphore, n int64) *waiter {
	w := l.head
	if w != nil {
		l.head = w.next
		l.len--
	} else if w = l.popSpill(); w == nil {
		w = &waiter{sem: s}
	}
	w.next = nil
	w.n = int32(n) // n ≤ MaxPermits
	w.status = waiting
	return w
}

// putLocked requires that w is off the queue and its event is clear.
func (l *waiterFreeList) putLocked(w *waiter) {
	if l.len >= maxFreeWaiters {
		return // left to the garbage collector
	}
	w.next = l.head
	l.head = w
	l.len++
}

// putSpill is putLocked for a caller that does not hold mu.
func (l *waiterFreeList) putSpill(w *waiter) {
	if l.spillLen.Load() >= maxFreeWaiters {
		return // left to the garbage collector
	}
	l.spillLen.Inc()
	for {
		head := l.spill.Load()
		w.next = head
		if l.spill.CompareAndSwap(head, w) {
			return
		}
	}
}

// popSpill takes a record from spill, or returns nil. It requires mu.
func (l *waiterFreeList) popSpill() *waiter {
	for {
		w := l.spill.Load()
		if w == nil {
			return nil
		}
		if l.spill.CompareAndSwap(w, w.next) {
			l.spillLen.Dec()
			return w
		}
	}
}

// waitQueue is a doubly linked FIFO list of waiters. All of it is guarded by
// the semaphore's mu.
type waitQueue struct {
	head, tail *waiter
	// lastArrival is the latest arrival stamped (barging mode only),
	// math.MinInt64 before the first.
	lastArrival int64
}

// stampArrival records in w, a waiter about to be queued for the first
// time, that it arrives now. It is called once per Acquire, not again when
// a woken waiter is requeued, so that waitedFor counts from the first
// arrival. The stamps are kept strictly increasing, so that they also give
// the arrival order that insertByArrival keeps: an arrival that reads the
// same clock value as the one before it (a coarse clock, or a
// testing/synctest bubble, whose clock stands still) is stamped a
// nanosecond later.
func (q *waitQueue) stampArrival(w *waiter) {
	now := int64(time.Since(epoch))
	if now <= q.lastArrival {
		now = q.lastArrival + 1
	}
	q.lastArrival = now
	w.arrival = now
}

func (q *waitQueue) empty() bool { return q.head == nil }

func (q *waitQueue) pushBack(w *waiter) {
	w.prev, w.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
}

// insertByArrival queues w, a woken waiter going back to sleep, at its
// place by arrival: behind the waiters that arrived before it and ahead of
// those that arrived after it. Several waiters woken at once, or by
// successive releases, may all lose the race for the permits and come back
// in any order; putting each at the front would reverse them. The walk is
// short: the waiters that arrived earlier are the ones woken with w that
// came back first, and those asking for more than the limit, which a
// dispatch that serves anyone behind them walks past as well.
func (q *waitQueue) insertByArrival(w *waiter) {
	next := q.head
	for next != nil && next.arrival < w.arrival && mutant.Active != mutant.RequeueFront {
		next = next.next
	}
	if next == nil {
		q.pushBack(w)
		return
	}
	w.prev, w.next = next.prev, next
	if next.prev != nil {
		next.prev.next = w
	} else {
		q.head = w
	}
	next.prev = w
}

func (q *waitQueue) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next = nil, nil
}
