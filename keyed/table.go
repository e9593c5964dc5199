package keyed

import (
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// numShards is the number of shards of a table: a power of two, large
// enough that two cores rarely want the same shard's lock at once.
const numShards = 256

// sampleAtCap is how many entries an insert that finds a Semaphores table
// full looks at, first in its own shard and then in others, to drop those
// indistinguishable from new ones before it refuses the key. The table
// drops nothing below its cap, since an entry dropped and made again costs
// more than one kept; at the cap it drops as many as it finds among these,
// so that the inserts after it find room at once. The number bounds the
// work a flood of new keys can cause per refused key. (A Limiter finds
// its droppable entries without sampling: see due.go.)
const sampleAtCap = 64

// roomTries bounds how often an insert at the cap makes room and then
// finds it taken by other inserts before it gives up.
const roomTries = 4

// table maps keys to values of type V, in shards. Values are made by the
// caller and dropped by the table when idle reports that they are
// indistinguishable from new ones.
//
// Every operation on a key's value is made under its shard's lock, so a
// value is never dropped in the middle of an operation on it. An operation
// that must wait records that it waits, in the value or in the shard's
// lines, before it lets go of the lock, and idle then reports false until
// it is done. A value lives in its shard's ents and moves when a key is
// dropped, or when the table's owner reorders ents (see index.go), so a
// caller holds its place or a pointer to it only while it holds the lock
// and changes nothing that moves it.
type table[V any] struct {
	shards [numShards]shard[V]
	seed   maphash.Seed
	max    int64
	count  atomic.Int64  // keys in all shards; at most max
	cursor atomic.Uint32 // the shard after which dropElsewhere starts
	// idle reports whether the value at place i of s can be dropped
	// without changing an answer. It is called with s locked.
	idle func(s *shard[V], i int) bool
	// moved, if set, is told that the value now at place i of s has
	// moved there from the end of s.ents, with s locked.
	moved func(s *shard[V], i int)
	// compacted, if set, is told that values of s were dropped and the
	// others moved down, in their order, with s locked.
	compacted func(s *shard[V])
	// makeRoom, if set, replaces the sampling at the cap: called with no
	// shard locked, it drops values that can be dropped and reports
	// whether it dropped any.
	makeRoom func() bool
}

type shard[V any] struct {
	mu sync.Mutex
	// ents, slots and where are the shard's keys with their values, and
	// the index that finds them (see index.go). Guarded by mu.
	ents  []ent[V]
	slots []uint32
	where []uint32
	// lines holds the keys that callers wait on, for a table whose values
	// do not record it themselves (Limiter's). Guarded by mu.
	lines map[string]*waitLine
	// dueTop is, for a Limiter, the due of the head of ents, which it
	// keeps as a heap (see due.go), or never; written under mu, read
	// without it.
	dueTop atomic.Int64
}

func (t *table[V]) init(max int64, idle func(*shard[V], int) bool) {
	t.seed = maphash.MakeSeed()
	t.max = max
	t.idle = idle
	for i := range t.shards {
		t.shards[i].dueTop.Store(never)
	}
}

// locate returns the shard that holds key and the part of key's hash that
// places it in the shard's index.
func (t *table[V]) locate(key string) (*shard[V], uint32) {
	h := hashOf(t.seed, key)
	return &t.shards[h%numShards], hiOf(h)
}

// insert returns key's place in s, adding key with the value mk makes if
// it is absent, as the last of s.ents, and reports whether it added it. It requires that s, key's shard, is locked, and hi is
// locate's for key; with makeRoom set, it lets s go and takes it again if
// the table is full. It returns ErrTooManyKeys, changing nothing but the
// keys it dropped, if the table is full and none of the keys it looked at
// could be dropped (with makeRoom, none at all, or the room it made went
// to other keys roomTries times over), and if s holds maxShardKeys.
func (t *table[V]) insert(s *shard[V], key string, hi uint32, mk func() V) (place int, added bool, err error) {
	i, slot := s.find(key, hi)
	if i >= 0 {
		return i, false, nil
	}
	if !t.reserve() {
		if t.makeRoom == nil {
			// The table is full: look harder, in this shard and then in
			// others, and refuse the key if that frees nothing.
			if t.drop(s, sampleAtCap) == 0 && t.dropElsewhere(s) == 0 || !t.reserve() {
				return -1, false, ErrTooManyKeys
			}
		} else {
			// makeRoom takes other shards' locks, so s is let go
			// meanwhile, and key may be there when it is taken again.
			for try := 0; ; try++ {
				s.mu.Unlock()
				made := t.makeRoom()
				s.mu.Lock()
				if i, _ := s.find(key, hi); i >= 0 {
					return i, false, nil
				}
				if t.reserve() {
					break
				}
				if !made || try == roomTries {
					return -1, false, ErrTooManyKeys
				}
			}
		}
		// s changed while the table looked for room.
		_, slot = s.find(key, hi)
	}
	if len(s.ents) >= maxShardKeys {
		t.count.Add(-1)
		return -1, false, ErrTooManyKeys
	}
	return s.add(t.seed, key, hi, slot, mk()), true, nil
}

// reserve counts one more key and reports whether the cap allowed it.
func (t *table[V]) reserve() bool {
	for {
		c := t.count.Load()
		if c >= t.max {
			return false
		}
		if t.count.CompareAndSwap(c, c+1) {
			return true
		}
	}
}

// drop looks at up to budget keys of s, from a random place in s.ents
// down, drops those that idle reports indistinguishable from new, and
// returns how many it dropped. It requires that s is locked, and is for a
// table without makeRoom, whose order of ents means nothing.
func (t *table[V]) drop(s *shard[V], budget int) int {
	n := len(s.ents)
	if n == 0 {
		return 0
	}
	i := rand.IntN(n)
	dropped := 0
	for ; budget > 0 && len(s.ents) > 0; budget-- {
		if i < 0 {
			i = len(s.ents) - 1
		}
		if t.idle(s, i) {
			t.remove(s, i)
			dropped++
		}
		i--
	}
	t.count.Add(int64(-dropped))
	return dropped
}

// remove takes the key at place i out of s, telling moved. It requires
// that s is locked; the caller counts the key out.
func (t *table[V]) remove(s *shard[V], i int) {
	if s.remove(t.seed, i) && t.moved != nil {
		t.moved(s, i)
	}
}

// dropElsewhere looks at up to sampleAtCap keys in the shards after the
// cursor, skipping own (which the caller holds) and any shard whose lock
// is taken, drops those idle reports indistinguishable from new, and
// returns how many it dropped. It takes other shards' locks only with
// TryLock, so two inserts that hold their own shards never wait for each
// other; the cursor moves on, so that successive calls look at different
// shards.
func (t *table[V]) dropElsewhere(own *shard[V]) int {
	dropped, budget := 0, sampleAtCap
	start := t.cursor.Add(1)
	for i := range uint32(numShards) {
		s := &t.shards[(start+i)%numShards]
		if s == own || !s.mu.TryLock() {
			continue
		}
		n := min(len(s.ents), budget)
		if n > 0 {
			dropped += t.drop(s, n)
		}
		s.mu.Unlock()
		if budget -= n; budget == 0 || dropped > 0 {
			break
		}
	}
	return dropped
}

// sweep drops every key of the table that idle reports indistinguishable
// from new, one shard at a time, and returns how many it dropped.
func (t *table[V]) sweep() int {
	dropped := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n := s.compact(t.seed, func(i int) bool { return t.idle(s, i) })
		if n > 0 && t.compacted != nil {
			t.compacted(s)
		}
		s.mu.Unlock()
		t.count.Add(int64(-n))
		dropped += n
	}
	return dropped
}

// each calls f on every key's value, one shard at a time with the shard
// locked.
func (t *table[V]) each(f func(key string, v V)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for _, e := range s.ents {
			f(e.key, e.v)
		}
		s.mu.Unlock()
	}
}

// len returns the number of keys held.
func (t *table[V]) len() int { return int(t.count.Load()) }
