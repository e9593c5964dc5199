package atomicsem

import "math"

// wantIndex remembers the smallest request among the queued waiters, so that
// the fairness checks can tell in constant time whether any queued waiter
// fits under the limit. A waiter that asks for more than the limit must not
// hold back others, and without the index every acquire that meets a queue
// of such waiters, and every release, walked the whole queue to step over
// them: with 10 000 parked, each call took tens of microseconds.
//
// The index counts the waiters that make the smallest request, so that one
// of them leaving costs nothing while others remain; when the last one
// leaves, the smallest request is unknown until smallest walks the queue
// once to find it. All of it is guarded by the semaphore's mu.
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
