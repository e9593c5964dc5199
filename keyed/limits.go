package keyed

import (
	"sync"
	"sync/atomic"

	"github.com/atomicsem/atomicsem/internal/errs"
)

// limits is what Semaphores and Gates share: a table with one limiter per
// key, each at the shared limit unless the key's own limit was set, and the
// rules by which the two change. The tables differ in their limiter, in
// what a request is, and in when a key's limiter is indistinguishable from
// a new one (their idle functions).
type limits[L setLimiter] struct {
	t        table[*keyEntry[L]]
	setMu    sync.Mutex   // serializes SetLimit, and orders ResetKeyLimit with it
	limit    atomic.Int64 // the shared limit
	maxLimit int64
	// newLimiter makes a key's limiter at the shared limit.
	newLimiter func() L
	// invalid and exceeds are the errors of a limit below 0 and of one
	// above maxLimit: the sentinels of the limiter's own package.
	invalid, exceeds error
}

// setLimiter is a key's limiter as limits changes it: SetLimit never fails
// for a limit in [0, maxLimit], since the tables never close their limiters.
type setLimiter interface{ SetLimit(limit int64) error }

// keyEntry is one key's limiter.
type keyEntry[L setLimiter] struct {
	lim L
	// waiting counts the Acquire calls on this entry that have left the
	// shard lock to wait. The entry is not dropped while any waits. It is
	// raised under the shard lock and lowered without it.
	waiting atomic.Int32
	// own is set while the key's limit was set by SetKeyLimit. Guarded by
	// the shard's lock.
	own bool
}

// init sets the shared limit and the table; idle reports whether a key's
// entry can be dropped (see table.init).
func (l *limits[L]) init(limit, maxLimit, maxKeys int64, newLimiter func() L, idle func(*shard[*keyEntry[L]], int) bool) {
	l.maxLimit, l.newLimiter = maxLimit, newLimiter
	l.limit.Store(limit)
	l.t.init(maxKeys, idle)
}

// newEntry makes a key's entry at the shared limit. It requires that the
// key's shard is locked, so that a SetLimit that stored a new limit either
// sees the entry or is seen by it.
func (l *limits[L]) newEntry() *keyEntry[L] { return &keyEntry[L]{lim: l.newLimiter()} }

// enter returns key's entry, made if absent, counted as waited on so that
// it is not dropped until the caller lowers waiting again.
func (l *limits[L]) enter(key string) (*keyEntry[L], error) {
	sh, hi := l.t.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, _, err := l.t.insert(sh, key, hi, l.newEntry)
	if err != nil {
		return nil, err
	}
	e := sh.ents[i].v
	e.waiting.Add(1)
	return e, nil
}

// checkLimit returns the error for a limit no limiter of the table takes.
func (l *limits[L]) checkLimit(limit int64) error {
	if limit < 0 {
		return errs.Errorf(l.invalid, "keyed: limit %d", limit)
	}
	if limit > l.maxLimit {
		return errs.Errorf(l.exceeds, "keyed: limit %d, max %d", limit, l.maxLimit)
	}
	return nil
}

// setLimit is SetLimit of both tables: it sets the shared limit and the
// limit of every key that has none of its own, one shard at a time.
func (l *limits[L]) setLimit(limit int64) error {
	if err := l.checkLimit(limit); err != nil {
		return err
	}
	l.setMu.Lock()
	defer l.setMu.Unlock()
	l.limit.Store(limit)
	l.t.each(func(_ string, e *keyEntry[L]) {
		if !e.own {
			_ = e.lim.SetLimit(limit) // within [0, max], never closed: cannot fail
		}
	})
	return nil
}

// setKeyLimit is SetKeyLimit of both tables: it sets key's own limit,
// making the key if absent.
func (l *limits[L]) setKeyLimit(key string, limit int64) error {
	if err := l.checkLimit(limit); err != nil {
		return err
	}
	sh, hi := l.t.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, _, err := l.t.insert(sh, key, hi, l.newEntry)
	if err != nil {
		return err
	}
	e := sh.ents[i].v
	e.own = true
	_ = e.lim.SetLimit(limit) // within [0, max], never closed: cannot fail
	return nil
}

// resetKeyLimit is ResetKeyLimit of both tables: a key with a limit of its
// own follows the shared limit again.
func (l *limits[L]) resetKeyLimit(key string) {
	// setMu orders the reset with SetLimit, so that the key does not keep
	// a shared limit that SetLimit has just replaced.
	l.setMu.Lock()
	defer l.setMu.Unlock()
	sh, hi := l.t.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i, _ := sh.find(key, hi); i >= 0 && sh.ents[i].v.own {
		e := sh.ents[i].v
		e.own = false
		_ = e.lim.SetLimit(l.limit.Load())
	}
}
