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
// entries in a min-heap by due, a moment at or before which the entry
// cannot be dropped: a lower bound of when it can. A new key that finds
// the table full looks only at the heads of the shards' heaps whose due has
// come, and finds every droppable entry there is.
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

// limEntry is one key of a Limiter.
type limEntry struct {
	st  credit.State
	key string // the key, to drop the entry from the map by
	due int64  // at or before the moment the entry can be dropped; see above
	pos int32  // the entry's place in its shard's heap
}

// dueHeap is a shard's Limiter entries, a binary min-heap by due.
type dueHeap []*limEntry

func (h dueHeap) less(i, j int) bool { return h[i].due < h[j].due }

func (h dueHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = int32(i), int32(j)
}

func (h dueHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h dueHeap) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && h.less(r, c) {
			c = r
		}
		if !h.less(c, i) {
			return
		}
		h.swap(i, c)
		i = c
	}
}

// push adds e to the heap.
func (h *dueHeap) push(e *limEntry) {
	e.pos = int32(len(*h))
	*h = append(*h, e)
	h.up(int(e.pos))
}

// remove takes e out of the heap.
func (h *dueHeap) remove(e *limEntry) {
	i, last := int(e.pos), len(*h)-1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	if i != last {
		h.down(i)
		h.up(i)
	}
}

// setDue sets e's due to d and moves it to its place.
func (h dueHeap) setDue(e *limEntry, d int64) {
	old := e.due
	e.due = d
	if d < old {
		h.up(int(e.pos))
	} else {
		h.down(int(e.pos))
	}
}

// top returns the head's due, or never if the heap is empty.
func (h dueHeap) top() int64 {
	if len(h) == 0 {
		return never
	}
	return h[0].due
}
