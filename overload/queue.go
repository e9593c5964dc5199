package overload

import "time"

// waitStatus says how a waiter's wait ended. It is written under the gate's
// lock before the waiter's channel is signalled, so the waiter may read it
// without the lock once it has received from the channel.
type waitStatus uint8

const (
	waiting waitStatus = iota // queued, nothing decided
	granted                   // the permits were granted to the waiter
	refused                   // shed or closed: why says which
)

// waiter is an Acquire that waits. Each is made by the goroutine that
// waits on it, channel included, and never reused, so that a waiter in a
// testing/synctest bubble never parks on a channel made in another.
type waiter struct {
	prev, next *waiter // links of its class's queue, oldest first; guarded by mu
	class      int
	n          int64
	arrival    time.Duration // when it arrived, on the gate's clock
	ready      chan struct{} // buffer of one: signalled once its wait is decided
	status     waitStatus    // guarded by mu
	why        error         // the refusal, when status is refused; guarded by mu
	// parked says that the arrival has finished queueing the waiter and
	// will park, so that its grant is one from the queue, which the
	// estimate of the wait learns from. Guarded by mu.
	parked bool
}

// shedReason indexes the counts of sheds in a class's queue.
type shedReason uint8

const (
	shedQueueFull shedReason = iota
	shedMaxWait
	shedDropped
	shedDeadline
	numShedReasons
)

// reasonOf returns the shed count an error belongs to, and false for an
// error that is not a shed (ErrClosed).
func reasonOf(err error) (shedReason, bool) {
	switch err {
	case ErrQueueFull:
		return shedQueueFull, true
	case ErrMaxWait:
		return shedMaxWait, true
	case ErrDropped:
		return shedDropped, true
	case ErrDeadline:
		return shedDeadline, true
	}
	return 0, false
}

// classQueue is one class's waiters, oldest first, with the state of its
// overload mode. Every field is guarded by the gate's mu.
type classQueue struct {
	head, tail *waiter
	len        int
	permits    int64 // requested by the waiters, for the expected wait

	// lifo is the overload mode: newest first, waiters older than twice
	// the target dropped, and the classes below shed. above and below
	// say that the queue's delay has been above the target, or at or
	// below it, at every observation since aboveSince or belowSince.
	// shedding is set when the mode begins and cleared once the queue
	// has stayed empty for the shed hold (empty since emptySince): while
	// it is set the classes below are shed (see sheds).
	lifo       bool
	shedding   bool
	empty      bool
	emptySince time.Duration
	above      bool
	aboveSince time.Duration
	below      bool
	belowSince time.Duration

	// lastGrant is when the lock holder last granted a waiter of the
	// class, valid if servedOnce: the starvation bound counts from it.
	lastGrant  time.Duration
	servedOnce bool

	shed [numShedReasons]uint64
}

// next returns the waiter the class serves next: its oldest, or its newest
// in the overload mode. It requires a non-empty queue.
func (q *classQueue) next() *waiter {
	if q.lifo {
		return q.tail
	}
	return q.head
}

// last returns the waiter the class would serve last. It requires a
// non-empty queue.
func (q *classQueue) last() *waiter {
	if q.lifo {
		return q.head
	}
	return q.tail
}

func (q *classQueue) push(w *waiter) {
	w.prev, w.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	q.len++
	q.permits += w.n
}

func (q *classQueue) remove(w *waiter) {
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
	q.len--
	q.permits -= w.n
}

// observe records the queue's delay at now, the age of its oldest waiter
// (zero for an empty queue), and moves the overload mode: on once the delay
// has stayed above target for interval, off once it has stayed at or below
// target for interval, the standing queue drained; and ends the shedding of
// the classes below once the queue has stayed empty for shedHold intervals
// (compared by division, which cannot overflow as a product could).
//
// An empty queue does not end the mode by itself: a queue that serves its
// newest waiters first and drops its oldest empties for a moment now and
// then while its class is still overloaded, and leaving the mode at such a
// moment would bring back arrival order, and a standing queue, for a whole
// interval before the mode could return.
func (q *classQueue) observe(now, target, interval time.Duration) {
	var delay time.Duration
	if q.len > 0 {
		delay = now - q.head.arrival
		q.empty = false
	} else if !q.empty {
		q.empty, q.emptySince = true, now
	} else if (now-q.emptySince)/shedHold >= interval {
		q.shedding = false
	}
	if delay > target {
		q.below = false
		if !q.above {
			q.above, q.aboveSince = true, now
		} else if now-q.aboveSince >= interval {
			q.lifo, q.shedding = true, true
		}
		return
	}
	q.above = false
	if !q.below {
		q.below, q.belowSince = true, now
	} else if now-q.belowSince >= interval {
		q.lifo = false
	}
}

// sheds reports whether the class sheds the classes below it: from the
// moment it enters the overload mode until its queue has stayed empty for
// the shed hold. Its queue may return to arrival order before that; but a
// class whose demand is about its share of the capacity goes in and out of
// the mode, and were the classes below admitted whenever it left, they
// would take the capacity its next burst needs, and it would shed its own
// requests for theirs. A queue that stays empty for the hold shows
// capacity to spare.
func (q *classQueue) sheds() bool { return q.shedding }

// shedHold is the shed hold, in intervals of the overload mode: how long
// an overloaded class's queue must stay empty before the classes below it
// are admitted again. A permit a lower class takes is held for as long as
// its request runs, which the gate does not know; the interval stands for
// it (CoDel's interval is meant to be about the time a request takes), and
// the hold is several of them, because a class whose demand is about the
// capacity empties its queue for an interval or two now and then, and a
// lower request let in then runs into the class's next burst, which drops
// its own requests for it.
const shedHold = 4
