package atomicsem

import (
	"math"
	"time"
)

// waitQueue is a doubly linked FIFO list of waiters. All of it is guarded by
// the semaphore's mu.
type waitQueue struct {
	head, tail *waiter
	len        int64     // the number of waiters queued, for Stats
	wants      wantIndex // the smallest request queued
	// lastArrival is the latest arrival stamped (barging mode only),
	// math.MinInt64 before the first.
	lastArrival int64
	// woken counts the waiters woken to compete for permits (barging mode)
	// that have not yet settled: taken their permits, queued again,
	// withdrawn or failed. While it is above zero the word does not show
	// eligible, so releases wake nobody more (see dispatch.go).
	woken int64
}

// enqueueLocked queues w at the back, or, for a woken waiter going back to
// sleep (requeue), at its place in arrival order. It requires that s.mu is
// held and the queue state set in the word.
func (s *Semaphore) enqueueLocked(w *waiter, requeue bool) {
	q := &s.queue
	q.wants.added(w.want(), q.empty())
	if requeue {
		q.insertByArrival(w)
	} else {
		q.pushBack(w)
	}
	q.len++
}

// removeLocked takes w off the queue. The word's queue state may then say
// more than is true (the queue may be empty, or hold only waiters above the
// limit), which only sends other calls to the lock; the caller brings it
// up to date next, by serving the queue (Close has cleared it already). It
// requires that s.mu is held.
func (s *Semaphore) removeLocked(w *waiter) {
	s.queue.remove(w)
	s.queue.wants.removed(w.want())
	s.queue.len--
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
	for next != nil && next.arrival < w.arrival {
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

// wantIndex remembers the smallest request among the queued waiters, so
// that the fairness checks can tell in constant time whether any queued
// waiter fits under the limit. A waiter that asks for more than the limit
// must not hold back others; without the index, every acquire that meets a
// queue of such waiters, and every release, would walk the whole queue to
// step over them.
//
// The index counts the waiters that make the smallest request, so that one
// of them leaving costs nothing while others remain; when the last one
// leaves, the smallest request is unknown until smallest walks the queue
// once to find it.
type wantIndex struct {
	min   int64 // the smallest request queued, while count > 0
	count int   // queued waiters asking for exactly min; 0 when unknown
}

// added records a waiter for n permits joining the queue; wasEmpty says
// whether the queue was empty before.
func (x *wantIndex) added(n int64, wasEmpty bool) {
	switch {
	case wasEmpty || (x.count > 0 && n < x.min):
		x.min, x.count = n, 1
	case x.count > 0 && n == x.min:
		x.count++
	}
}

// removed records a waiter for n permits leaving the queue.
func (x *wantIndex) removed(n int64) {
	if x.count > 0 && n == x.min {
		x.count--
	}
}

// smallest returns the smallest request queued in q, or math.MaxInt64 if q
// is empty.
func (x *wantIndex) smallest(q *waitQueue) int64 {
	if q.empty() {
		return math.MaxInt64
	}
	if x.count == 0 {
		x.min = math.MaxInt64
		for w := q.head; w != nil; w = w.next {
			switch n := w.want(); {
			case n < x.min:
				x.min, x.count = n, 1
			case n == x.min:
				x.count++
			}
		}
	}
	return x.min
}
