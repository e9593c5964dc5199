package keyed

import (
	"hash/maphash"
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
// it is done.
type table[V any] struct {
	shards [numShards]shard[V]
	seed   maphash.Seed
	max    int64
	count  atomic.Int64  // keys in all shards; at most max
	cursor atomic.Uint32 // the shard after which dropElsewhere starts
	// idle reports whether key's value v can be dropped without changing
	// an answer. It is called with key's shard s locked.
	idle func(s *shard[V], key string, v V) bool
	// dropped, if set, is told of each value the table drops, with its
	// shard locked.
	dropped func(s *shard[V], v V)
	// makeRoom, if set, replaces the sampling at the cap: called with no
	// shard locked, it drops values that can be dropped and reports
	// whether it dropped any.
	makeRoom func() bool
}

type shard[V any] struct {
	mu sync.Mutex
	m  map[string]V // guarded by mu
	// lines holds the keys that callers wait on, for a table whose values
	// do not record it themselves (Limiter's). Guarded by mu.
	lines map[string]*waitLine
	// due is a Limiter's entries by the moment they may be dropped (see
	// due.go). Guarded by mu.
	due dueHeap
	// dueTop is due's head's due, or never; written under mu, read
	// without it.
	dueTop atomic.Int64
}

func (t *table[V]) init(max int64, idle func(*shard[V], string, V) bool) {
	t.seed = maphash.MakeSeed()
	t.max = max
	t.idle = idle
	for i := range t.shards {
		t.shards[i].dueTop.Store(never)
	}
}

// shardOf returns the shard that holds key.
func (t *table[V]) shardOf(key string) *shard[V] {
	return &t.shards[maphash.String(t.seed, key)%numShards]
}

// insert returns key's value, made with mk if key is absent. It requires
// that s, key's shard, is locked; with makeRoom set, it lets s go and takes
// it again if the table is full. It returns ErrTooManyKeys, changing
// nothing but the keys it dropped, if the table is full and none of the
// keys it looked at could be dropped (with makeRoom, none at all, or the
// room it made went to other keys roomTries times over).
func (t *table[V]) insert(s *shard[V], key string, mk func() V) (V, error) {
	if v, ok := s.m[key]; ok {
		return v, nil
	}
	if !t.reserve() {
		var zero V
		if t.makeRoom == nil {
			// The table is full: look harder, in this shard and then in
			// others, and refuse the key if that frees nothing.
			if t.drop(s, sampleAtCap) == 0 && t.dropElsewhere(s) == 0 || !t.reserve() {
				return zero, ErrTooManyKeys
			}
		} else {
			// makeRoom takes other shards' locks, so s is let go
			// meanwhile, and key may be there when it is taken again.
			for try := 0; ; try++ {
				s.mu.Unlock()
				made := t.makeRoom()
				s.mu.Lock()
				if v, ok := s.m[key]; ok {
					return v, nil
				}
				if t.reserve() {
					break
				}
				if !made || try == roomTries {
					return zero, ErrTooManyKeys
				}
			}
		}
	}
	if s.m == nil {
		s.m = make(map[string]V)
	}
	v := mk()
	s.m[key] = v
	return v, nil
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

// drop looks at up to budget keys of s (all of them if budget < 0), from a
// random place in its map, drops those that idle reports
// indistinguishable from new, and returns how many it dropped. It requires
// that s is locked.
func (t *table[V]) drop(s *shard[V], budget int) int {
	dropped := 0
	for k, v := range s.m {
		if budget == 0 {
			break
		}
		budget--
		if t.idle(s, k, v) {
			delete(s.m, k)
			if t.dropped != nil {
				t.dropped(s, v)
			}
			dropped++
		}
	}
	t.count.Add(int64(-dropped))
	return dropped
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
		n := min(len(s.m), budget)
		dropped += t.drop(s, n)
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
		dropped += t.drop(s, -1)
		s.mu.Unlock()
	}
	return dropped
}

// each calls f on every key's value, one shard at a time with the shard
// locked.
func (t *table[V]) each(f func(key string, v V)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for k, v := range s.m {
			f(k, v)
		}
		s.mu.Unlock()
	}
}

// len returns the number of keys held.
func (t *table[V]) len() int { return int(t.count.Load()) }
