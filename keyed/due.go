package keyed

import (
	"math"

	"github.com/atomicsem/atomicsem/credit"
)

// Finding a Limiter's droppable keys.
//
// A key of a Limiter can be dropped once its bucket is full with nothing
// reserved and nobody waiting, and a bucket fills by the passing of time
// alone, with no call to see it happen. So each shard keeps its Limiter
// entries as a min-heap by due, a moment at or before which the entry
// cannot be dropped: a lower bound of when it can. A new key that finds
// the table full looks only at the heads of the shards' heaps whose due has
// come, and finds every droppable entry there is.
//
// The heap is the shard's ents itself, in heap order, so it costs a key
// its due and nothing more: the index follows an entry as it moves (see
// index.go). An entry moves only when a key is added or dropped, or when
// its due changes.
//
// The bound is kept without touching the heap on the hot path. A spend or
// a reservation only moves the moment an entry can be dropped later, so
// its old due is still a lower bound, and nothing is done. The few changes
// that can move it earlier (credit given back, a reservation settled, a
// line emptied) lower due to now, which any later moment is at or after.
// The head whose due has come is looked at when room is needed: dropped if
// it can be, and otherwise given its exact due (never, while it has credit
// reserved or a line, until one of those changes lowers it) and sifted
// down. Each look either drops an entry or fixes a due that an operation
// made stale, so the work of finding room is paid for by the operations
// that made the bounds stale, once each.
//
// dueTop mirrors the head's due, so that a new key can skip a shard whose
// head is not due without taking its lock.

// never is the due of an entry that no passing of time makes droppable.
const never = math.MaxInt64

// limEntry is one key of a Limiter, in its shard's ents beside the key.
type limEntry struct {
	st  credit.State
	due int64 // at or before the moment the entry can be dropped; see above
}

// limShard is a shard of a Limiter. The functions below keep its ents a
// binary min-heap by due, and require that it is locked.
type limShard = shard[limEntry]

func dueLess(s *limShard, i, j int) bool { return s.ents[i].v.due < s.ents[j].v.due }

// dueUp moves the entry at place i up to its place in the heap, and
// returns that place.
func dueUp(s *limShard, i int) int {
	for i > 0 {
		p := (i - 1) / 2
		if !dueLess(s, i, p) {
			break
		}
		s.swap(i, p)
		i = p
	}
	return i
}

// dueDown moves the entry at place i down to its place in the heap, and
// returns that place.
func dueDown(s *limShard, i int) int {
	for {
		c := 2*i + 1
		if c >= len(s.ents) {
			return i
		}
		if r := c + 1; r < len(s.ents) && dueLess(s, r, c) {
			c = r
		}
		if !dueLess(s, c, i) {
			return i
		}
		s.swap(i, c)
		i = c
	}
}

// dueFix moves the entry at place i, whose due may be out of order, to its
// place in the heap, and returns that place.
func dueFix(s *limShard, i int) int {
	if j := dueDown(s, i); j != i {
		return j
	}
	return dueUp(s, i)
}

// setDue sets the due of the entry at place i to d, moves it to its place
// in the heap, updates dueTop, and returns the entry's place.
func setDue(s *limShard, i int, d int64) int {
	old := s.ents[i].v.due
	s.ents[i].v.due = d
	if d < old {
		i = dueUp(s, i)
	} else {
		i = dueDown(s, i)
	}
	s.dueTop.Store(dueHead(s))
	return i
}

// dueHeapify puts ents in heap order, after a change to many places.
func dueHeapify(s *limShard) {
	for i := len(s.ents)/2 - 1; i >= 0; i-- {
		dueDown(s, i)
	}
	s.dueTop.Store(dueHead(s))
}

// dueHead returns the head's due, or never if the shard is empty.
func dueHead(s *limShard) int64 {
	if len(s.ents) == 0 {
		return never
	}
	return s.ents[0].v.due
}
