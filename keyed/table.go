package keyed

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// numShards is the number of shards of a table: a power of two, large
// enough that two cores rarely want the same shard's lock at once.
const numShards = 256

// sampleOnInsert is how many entries an insert looks at, to drop those
// indistinguishable from new ones. Looking at a few on every insert keeps
// the table near the set of keys in use without a goroutine, as an
// incremental collector keeps up with allocation.
const sampleOnInsert = 2

// sampleAtCap is how many entries of its shard an insert that finds the
// table full looks at before it refuses the key. It bounds the work a flood
// of new keys can cause per refused key.
const sampleAtCap = 64

// table maps keys to entries of type E, in shards. Entries are made by the
// caller and dropped by the table when idle reports that they are
// indistinguishable from new ones.
//
// Every operation on an entry is made under its shard's lock: a read lock
// for operations that do not wait, the write lock to insert or drop. So an
// entry is never dropped in the middle of an operation on it; an operation
// that must wait records that it waits in the entry before it lets go of
// the read lock, and idle then reports false until it is done.
type table[E any] struct {
	shards [numShards]shard[E]
	seed   maphash.Seed
	max    int64
	count  atomic.Int64  // entries in all shards; at most max
	cursor atomic.Uint32 // the shard after which dropElsewhere starts
	// idle reports whether an entry can be dropped without changing an
	// answer. It is called with the entry's shard write-locked.
	idle func(*E) bool
}

type shard[E any] struct {
	mu sync.RWMutex
	m  map[string]*E // guarded by mu
}

func (t *table[E]) init(max int64, idle func(*E) bool) {
	t.seed = maphash.MakeSeed()
	t.max = max
	t.idle = idle
}

// shardOf returns the shard that holds key.
func (t *table[E]) shardOf(key string) *shard[E] {
	return &t.shards[maphash.String(t.seed, key)%numShards]
}

// insert returns key's entry, making it with mk if it is absent. It
// requires that s, key's shard, is write-locked. It returns ErrTooManyKeys,
// changing nothing but the entries it dropped, if the table is full and
// none of the entries it looked at could be dropped.
func (t *table[E]) insert(s *shard[E], key string, mk func() *E) (*E, error) {
	if e, ok := s.m[key]; ok {
		return e, nil
	}
	t.drop(s, sampleOnInsert)
	if !t.reserve() {
		// The table is full: look harder, in this shard and then in
		// others, and refuse the key if that frees nothing.
		if t.drop(s, sampleAtCap) == 0 && t.dropElsewhere(s) == 0 || !t.reserve() {
			return nil, ErrTooManyKeys
		}
	}
	if s.m == nil {
		s.m = make(map[string]*E)
	}
	e := mk()
	s.m[key] = e
	return e, nil
}

// reserve counts one more entry and reports whether the cap allowed it.
func (t *table[E]) reserve() bool {
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

// drop looks at up to budget entries of s, from a random place in its map,
// drops those that idle reports indistinguishable from new, and returns
// how many it dropped. It requires that s is write-locked.
func (t *table[E]) drop(s *shard[E], budget int) int {
	dropped := 0
	for k, e := range s.m {
		if budget == 0 {
			break
		}
		budget--
		if t.idle(e) {
			delete(s.m, k)
			dropped++
		}
	}
	t.count.Add(int64(-dropped))
	return dropped
}

// dropElsewhere looks at up to sampleAtCap entries in the shards after the
// cursor, skipping own (which the caller holds) and any shard whose lock is
// taken, drops those idle reports indistinguishable from new, and returns
// how many it dropped. It takes other shards' locks only with TryLock, so
// two inserts that hold their own shards never wait for each other; the
// cursor moves on, so that successive calls look at different shards.
func (t *table[E]) dropElsewhere(own *shard[E]) int {
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

// sweep drops every entry of the table that idle reports
// indistinguishable from new, one shard at a time, and returns how many it
// dropped.
func (t *table[E]) sweep() int {
	dropped := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		dropped += t.drop(s, -1)
		s.mu.Unlock()
	}
	return dropped
}

// each calls f on every entry, one shard at a time with the shard
// write-locked.
func (t *table[E]) each(f func(key string, e *E)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for k, e := range s.m {
			f(k, e)
		}
		s.mu.Unlock()
	}
}

// len returns the number of keys held.
func (t *table[E]) len() int { return int(t.count.Load()) }
