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

	// lifo is the overload mode: newest first, and waiters older than
	// twice the target are dropped. above says that the queue's delay
	// has been above the target at every observation since aboveSince.
	lifo       bool
	above      bool
	aboveSince time.Duration

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
	if q.len == 0 {
		// The queue drained: back to arrival order.
		q.lifo, q.above = false, false
	}
}

// observe records the queue's delay, the age of its oldest waiter, at now,
// and turns the overload mode on once the delay has stayed above target for
// interval. Only draining turns it off (remove).
func (q *classQueue) observe(now, target, interval time.Duration) {
	if q.len == 0 {
		return
	}
	switch delay := now - q.head.arrival; {
	case delay <= target:
		q.above = false
	case !q.above:
		q.above, q.aboveSince = true, now
	case now-q.aboveSince >= interval:
		q.lifo = true
	}
}
