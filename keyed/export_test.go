package keyed

import (
	"fmt"
	"hash/maphash"
	"math/bits"

	"github.com/atomicsem/atomicsem/overload"
)

// CheckDue returns an error if a shard of l breaks what makeRoom relies
// on: its ents are in heap order by due, dueTop is its head, and every
// entry's due is at or before the
// moment it can be dropped (now, for one that can be dropped now); or if
// the table breaks its index's invariants (see CheckIndex).
func CheckDue(l *Limiter) error {
	if err := checkTable(&l.t); err != nil {
		return err
	}
	now := l.cfg.Now()
	for i := range l.t.shards {
		s := &l.t.shards[i]
		s.mu.Lock()
		err := checkShardDue(l, s, now)
		s.mu.Unlock()
		if err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
	}
	return nil
}

func checkShardDue(l *Limiter, s *limShard, now int64) error {
	if s.dueTop.Load() != dueHead(s) {
		return fmt.Errorf("dueTop %d, head %d", s.dueTop.Load(), dueHead(s))
	}
	for i := range s.ents {
		k, e := s.ents[i].key, &s.ents[i].v
		if p := (i - 1) / 2; i > 0 && s.ents[p].v.due > e.due {
			return fmt.Errorf("entry %q is due before its parent", k)
		}
		when := l.dueOf(s, i, now)
		if l.idle(s, i) {
			when = now
		}
		if e.due > max(when, now) {
			return fmt.Errorf("entry %q is due at %d, after it can be dropped (%d)", k, e.due, when)
		}
	}
	return nil
}

// CheckIndex returns an error if a shard of s breaks the invariants of
// index.go, or the table's count is not its keys.
func CheckIndex(s *Semaphores) error { return checkTable(&s.t) }

func checkTable[V any](t *table[V]) error {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		err := checkIndex(s, t.seed)
		n += len(s.ents)
		s.mu.Unlock()
		if err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
	}
	if c := t.count.Load(); c != int64(n) {
		return fmt.Errorf("count %d, %d keys held", c, n)
	}
	return nil
}

// checkIndex checks the invariants of s's index, each stated in index.go.
func checkIndex[V any](s *shard[V], seed maphash.Seed) error {
	n := len(s.slots)
	if n == 0 {
		if len(s.ents) != 0 || len(s.where) != 0 {
			return fmt.Errorf("%d entries and no index", len(s.ents))
		}
		return nil
	}
	if bits.OnesCount(uint(n)) != 1 || n < minSlots || n > maxSlots {
		return fmt.Errorf("invariant 1: %d slots", n)
	}
	if len(s.ents) > n/4*3 {
		return fmt.Errorf("invariant 1: %d entries in %d slots", len(s.ents), n)
	}
	if len(s.where) != len(s.ents) {
		return fmt.Errorf("invariant 3: %d entries, %d wheres", len(s.ents), len(s.where))
	}
	mask := uint32(n - 1)
	seen := make([]bool, len(s.ents))
	for p, v := range s.slots {
		if v == 0 {
			continue
		}
		i := int(v&mask) - 1
		if i >= len(s.ents) {
			return fmt.Errorf("invariant 3: slot %d names place %d of %d", p, i, len(s.ents))
		}
		if seen[i] {
			return fmt.Errorf("invariant 2: place %d named twice", i)
		}
		seen[i] = true
		if s.where[i] != uint32(p) {
			return fmt.Errorf("invariant 2: %q is in slot %d, where says %d", s.ents[i].key, p, s.where[i])
		}
		hi := hiOf(hashOf(seed, s.ents[i].key))
		if v&^mask != hi&^mask {
			return fmt.Errorf("invariant 2: slot %d holds the wrong tag for %q", p, s.ents[i].key)
		}
		for q := hi & mask; q != uint32(p); q = (q + 1) & mask {
			if s.slots[q] == 0 {
				return fmt.Errorf("invariant 2: an empty slot between %q's home and its slot", s.ents[i].key)
			}
		}
	}
	for i, ok := range seen {
		if !ok {
			return fmt.Errorf("invariant 2: place %d (%q) has no slot", i, s.ents[i].key)
		}
	}
	return nil
}

// Index is one shard's index of string keys to ints, for tests of the
// index against a map.
type Index struct {
	s    shard[int]
	seed maphash.Seed
}

func NewIndex() *Index { return &Index{seed: maphash.MakeSeed()} }

// Get returns key's value and whether it is present.
func (x *Index) Get(key string) (int, bool) {
	i, _ := x.s.find(key, hiOf(hashOf(x.seed, key)))
	if i < 0 {
		return 0, false
	}
	return x.s.ents[i].v, true
}

// Put sets key's value, adding key if it is absent.
func (x *Index) Put(key string, v int) {
	hi := hiOf(hashOf(x.seed, key))
	i, slot := x.s.find(key, hi)
	if i < 0 {
		x.s.add(x.seed, key, hi, slot, v)
		return
	}
	x.s.ents[i].v = v
}

// Delete removes key and reports whether it was present.
func (x *Index) Delete(key string) bool {
	i, _ := x.s.find(key, hiOf(hashOf(x.seed, key)))
	if i < 0 {
		return false
	}
	x.s.remove(x.seed, i)
	return true
}

// Swap exchanges the places of the i-th and j-th keys, as a table's
// owner reorders them.
func (x *Index) Swap(i, j int) { x.s.swap(i, j) }

// Compact drops every key whose value drop reports true, in one pass.
func (x *Index) Compact(drop func(v int) bool) int {
	return x.s.compact(x.seed, func(i int) bool { return drop(x.s.ents[i].v) })
}

// Len returns the number of keys.
func (x *Index) Len() int { return len(x.s.ents) }

// Mem returns the slots of the index and the capacity of its entries.
func (x *Index) Mem() (slots, ents int) { return len(x.s.slots), cap(x.s.ents) }

// Check returns an error if the index breaks an invariant of index.go.
func (x *Index) Check() error { return checkIndex(&x.s, x.seed) }

// GateOf returns the gate the table holds for key, and false if it holds
// none.
func GateOf(s *Gates, key string) (*overload.Gate, bool) {
	sh, hi := s.t.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i, _ := sh.find(key, hi); i >= 0 {
		return sh.ents[i].v.lim, true
	}
	return nil, false
}

// CheckGatesIndex is CheckIndex for a Gates table.
func CheckGatesIndex(s *Gates) error { return checkTable(&s.t) }
