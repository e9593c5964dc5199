package keyed

import "hash/maphash"

// A shard's index.
//
// A shard keeps its entries in ents, a slice with no gaps, each the key
// and its value side by side, and finds a key's place there through
// slots, a hash table of 32-bit slots with linear probing; where[i] is the
// slot that names ents[i], so that an entry can change places in O(1), to
// keep ents in the order its table wants (a Limiter's heap: see due.go),
// and leave without its key being hashed again. A key costs its entry, a
// slot or two, and its where: no object of its own, no pointer to one,
// and no second copy of the key.
//
// A slot reads, with len(slots) = 1 << shift:
//
//	 31                  shift   shift-1                  0
//	┌─────────────────────────┬─────────────────────────┐
//	│ tag: the hash's bits at │ place in ents + 1;      │
//	│ and above shift         │ 0: the slot is empty    │
//	└─────────────────────────┴─────────────────────────┘
//
// The hash is the high half of the key's maphash (the low bits choose the
// shard). A key's probe starts at its home, the hash's low shift bits, and
// goes up one slot at a time, wrapping, to the first empty slot. The tag
// lets a probe skip a slot whose key differs without reading the key.
//
// Invariants, each true whenever the shard's lock is free:
//  1. len(slots) is 0 or a power of two from minSlots to maxSlots, and
//     len(ents) is at most three quarters of it, so every probe ends.
//  2. Each entry i has exactly one slot, where[i], which holds i+1 and its
//     key's tag, and no empty slot lies between its key's home and that
//     slot.
//  3. No slot names a place at or past len(ents), and
//     len(where) = len(ents).
//
// Removing an entry empties its slot and then moves up into the hole each
// later slot of the run whose home does not lie after the hole (the
// backward shift of linear probing), so that invariant 2 holds with no
// marker for deleted slots; then the last entry of ents moves into the
// place the removed one held. The index grows at three quarters full and
// halves when an eighth full, and ents halves its capacity when a quarter
// full, so that memory follows the keys held both ways, as Sweep promises.

// minSlots is the size of a shard's index when it first holds a key.
const minSlots = 8

// maxSlots bounds a shard's index so that every place and tag fits a slot
// on every platform. A shard then holds at most maxShardKeys keys, far
// more than any memory holds at the size of an entry.
const (
	maxSlots     = 1 << 30
	maxShardKeys = maxSlots / 4 * 3
)

// ent is one key of a shard and its value.
type ent[V any] struct {
	key string
	v   V
}

// hashOf returns the hash of key: its low bits choose the shard, its high
// half (hiOf) places the key in the shard's index.
func hashOf(seed maphash.Seed, key string) uint64 { return maphash.String(seed, key) }

func hiOf(h uint64) uint32 { return uint32(h >> 32) }

// find returns the place in s.ents of key, whose hash's high half is hi,
// and the slot that names it; or, if key is absent, -1 and the empty slot
// where its probe ended (-1 too if the index has no slots). It requires
// that s is locked.
func (s *shard[V]) find(key string, hi uint32) (place, slot int) {
	if len(s.slots) == 0 {
		return -1, -1
	}
	mask := uint32(len(s.slots) - 1)
	tag := hi &^ mask
	for p := hi & mask; ; p = (p + 1) & mask {
		v := s.slots[p]
		if v == 0 {
			return -1, int(p)
		}
		if v&^mask == tag {
			if i := int(v&mask) - 1; s.ents[i].key == key {
				return i, int(p)
			}
		}
	}
}

// add appends key, which is absent, with value v, and returns its place,
// the last. slot is where find's probe for key ended; add finds it again
// if the index must grow first. It requires that s is locked and holds
// fewer than maxShardKeys keys.
func (s *shard[V]) add(seed maphash.Seed, key string, hi uint32, slot int, v V) int {
	if len(s.ents) >= len(s.slots)/4*3 {
		s.resize(seed, max(minSlots, 2*len(s.slots)))
		_, slot = s.find(key, hi)
	}
	i := len(s.ents)
	s.ents = append(s.ents, ent[V]{key: key, v: v})
	s.where = append(s.where, uint32(slot))
	s.slots[slot] = hi&^uint32(len(s.slots)-1) | uint32(i+1)
	return i
}

// name makes entry i's slot name place i. It requires that s is locked.
func (s *shard[V]) name(i int) {
	mask := uint32(len(s.slots) - 1)
	w := s.where[i]
	s.slots[w] = s.slots[w]&^mask | uint32(i+1)
}

// swap exchanges the places of entries i and j. It requires that s is
// locked.
func (s *shard[V]) swap(i, j int) {
	s.ents[i], s.ents[j] = s.ents[j], s.ents[i]
	s.where[i], s.where[j] = s.where[j], s.where[i]
	s.name(i)
	s.name(j)
}

// remove takes the entry at place i out of the index and out of ents,
// moving the last entry into place i, and reports whether it moved one.
// It requires that s is locked.
func (s *shard[V]) remove(seed maphash.Seed, i int) (moved bool) {
	s.unslot(seed, int(s.where[i]))
	last := len(s.ents) - 1
	if i != last {
		s.ents[i], s.where[i] = s.ents[last], s.where[last]
		s.name(i)
	}
	s.ents[last] = ent[V]{} // lets the key go
	s.ents, s.where = s.ents[:last], s.where[:last]
	s.shrink(seed)
	return i != last
}

// unslot empties slot hole and moves up into it, one after another, the
// later slots of its run that may sit there: those whose home does not lie
// in the run after the hole. It requires that s is locked.
func (s *shard[V]) unslot(seed maphash.Seed, hole int) {
	mask := len(s.slots) - 1
	for j := (hole + 1) & mask; s.slots[j] != 0; j = (j + 1) & mask {
		p := int(s.slots[j]&uint32(mask)) - 1
		home := int(hiOf(hashOf(seed, s.ents[p].key))) & mask
		// Does its home lie in (hole, j]? Then its probe never passes
		// the hole, and it stays.
		if (j-home)&mask < (j-hole)&mask {
			continue
		}
		s.slots[hole], s.where[p] = s.slots[j], uint32(hole)
		hole = j
	}
	s.slots[hole] = 0
}

// resize makes the index n slots, a power of two that holds the entries
// within invariant 1, and slots every entry anew. It requires that s is
// locked.
func (s *shard[V]) resize(seed maphash.Seed, n int) {
	s.slots = make([]uint32, n)
	mask := uint32(n - 1)
	for i := range s.ents {
		hi := hiOf(hashOf(seed, s.ents[i].key))
		p := hi & mask
		for s.slots[p] != 0 {
			p = (p + 1) & mask
		}
		s.slots[p], s.where[i] = hi&^mask|uint32(i+1), p
	}
}

// shrink gives back memory that the keys held no longer need: it halves
// the index while it is under an eighth full, and the capacity of ents and where
// when a quarter full, down to nothing when the shard is empty. It
// requires that s is locked.
func (s *shard[V]) shrink(seed maphash.Seed) {
	n := len(s.ents)
	if n == 0 {
		s.ents, s.where, s.slots = nil, nil, nil
		return
	}
	if k := len(s.slots); k > minSlots && n < k/8 {
		for k > minSlots && n < k/8 {
			k /= 2
		}
		s.resize(seed, k)
	}
	if cap(s.ents) > 2*minSlots && n <= cap(s.ents)/4 {
		s.ents = append(make([]ent[V], 0, 2*n), s.ents...)
		s.where = append(make([]uint32, 0, 2*n), s.where...)
	}
}

// compact drops from s, in one pass, every entry that drop reports may go,
// keeping the order of the others, and returns how many it dropped. drop
// is called on each entry at its place before the pass moves it. It
// requires that s is locked.
func (s *shard[V]) compact(seed maphash.Seed, drop func(i int) bool) int {
	kept := 0
	for i := range s.ents {
		if drop(i) {
			// unslot renames, in where, entries still to come at their
			// places and those kept at their new ones.
			s.unslot(seed, int(s.where[i]))
			continue
		}
		if kept != i {
			s.ents[kept], s.where[kept] = s.ents[i], s.where[i]
			s.name(kept)
		}
		kept++
	}
	dropped := len(s.ents) - kept
	clear(s.ents[kept:])
	s.ents, s.where = s.ents[:kept], s.where[:kept]
	if dropped > 0 {
		s.shrink(seed)
	}
	return dropped
}
