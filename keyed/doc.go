// Package keyed provides limits per key: a credit bucket per key (Limiter),
// a semaphore per key (Semaphores) and a priority gate per key (Gates),
// with memory bounded by a cap on the number of keys, and HTTP middleware
// that limits each client.
//
// Every key gets its own limit of one shared configuration: the same rate
// and burst for every bucket, the same limit for every semaphore, the same
// limit, classes and queue discipline for every gate. An entry is made for
// a key the first time it is used. An entry that is indistinguishable from
// a new one (a full bucket nobody waits on, a semaphore nothing holds and
// nobody waits on, a gate that overload.Gate.Idle reports idle, each at the
// shared limit) may be dropped at any time, because dropping it changes no answer: the next use
// of its key makes a new entry in the same state. No goroutine or timer
// runs per key. Entries are dropped by a call that inserts a new key into
// a full table, as many as it finds among the few it looks at, and by
// Sweep, which a program that wants the memory of idle keys back below
// the cap calls from a ticker of its own.
//
// # The cap on keys
//
// A table holds at most its cap of keys (WithMaxKeys; DefaultMaxKeys
// otherwise). A new key that finds the table full first drops entries
// indistinguishable from new ones; if it finds none, the new key is
// refused: the blocking calls return ErrTooManyKeys, and the non-blocking
// ones report false. A key in the middle of its limit is never dropped, so
// the cap never resets anyone's limit: under a flood of new keys the keys
// already limited keep their limits, and the flood is refused.
//
// A Limiter finds every entry that can be dropped: each shard keeps its
// entries in order of the moment each may become droppable, so a new key
// looks only where one is due. A new key is refused only if, when it
// looked at each shard, no entry of the table could be dropped, or if the
// room it made was taken by other new keys first, five times over.
//
// A Semaphores or Gates table cannot see a key become idle: a token goes
// back to its key's semaphore or gate, not through the table. A new key
// that finds it full looks at up to 64 entries of its own shard and as many
// again in others, and is refused if none of those can be dropped, even
// while an idle entry lies elsewhere. Sweep drops every idle entry; a
// program whose table runs at its cap calls it from a ticker.
//
// # Priorities per key
//
// Gates gives each key an overload.Gate: the key's limit is shared by
// classes of requests in priority order, each with a guaranteed share and
// a ceiling, and the key's waiters are served by priority under the
// table's queue discipline (WithGateOptions: a bounded queue, a maximum
// wait, the overload mode, the starvation bound). Each key answers as an
// overload.Gate of the same configuration, with the same errors; one key's
// overload sheds that key's requests, not another's. GatesMiddleware
// admits HTTP requests through the gate of the request's key, for the
// class overload.Middleware would give them.
//
// A gate is dropped only when it is a new gate's twin (overload.Gate.Idle):
// besides nothing held and nobody waiting, its overload mode, if it had
// one, has run out, and it has forgotten its estimate of the wait
// (overload.EstimateMemory after the last grant from its queue). A key that
// queued a moment ago stays that long.
//
// # Concurrency
//
// The table is split into shards, each a hash table under its own mutex,
// chosen by the key's hash. A call on a key already present takes its
// shard's lock for a lookup and one operation on the key's entry, with no
// allocation; calls that wait let go of the lock while they wait. No lock
// covers the whole table.
//
// # Memory
//
// A shard keeps its keys in one slice, each key's string beside its
// entry, and finds them through an index of 4-byte slots, of which each
// key has between 4/3 and 8/3. A key of a Limiter costs 52 bytes of
// slices (its string header, a credit.State, the moment from which it may
// be dropped, and the number of its slot) and its slots; a key of
// Semaphores costs 28 bytes, its slots, and its semaphore; a key of Gates
// costs 28 bytes, its slots, a 16-byte entry and its gate, an
// overload.Gate of about a kilobyte whatever its number of classes, so a
// key of Gates takes several times the memory of a key of Semaphores. Where only
// a few keys need priorities of their own, a Semaphores or Limiter table
// in front of one overload.Gate for the whole service costs less. The
// key's own bytes are the caller's string, which the table keeps. A shard's slices
// and index grow at once, under the shard's lock, as keys are added, and
// shrink as keys are dropped, so that Sweep gives back the memory of the
// keys it drops.
package keyed

import (
	"errors"
	"fmt"

	"github.com/atomicsem/atomicsem/overload"
)

// ErrTooManyKeys is returned when a call would add a key to a table that
// holds its cap of keys and finds none it can drop without changing an
// answer (see "The cap on keys" above for where each table looks).
var ErrTooManyKeys = errors.New("keyed: too many keys")

// ErrInvalidMaxKeys is returned (wrapped, with the number) by the
// constructors for WithMaxKeys below 1.
var ErrInvalidMaxKeys = errors.New("keyed: invalid cap on keys")

// DefaultMaxKeys is the cap on the number of keys of a table made without
// WithMaxKeys.
const DefaultMaxKeys = 1 << 20

// An Option configures a Limiter, a Semaphores table or a Gates table.
type Option func(*options)

type options struct {
	maxKeys     int64
	maxLimit    int64
	hasMaxLimit bool
	gateOpts    []overload.Option
}

func makeOptions(opts []Option) (options, error) {
	o := options{maxKeys: DefaultMaxKeys}
	for _, opt := range opts {
		if opt == nil {
			panic("keyed: nil Option")
		}
		opt(&o)
	}
	if o.maxKeys < 1 {
		return o, fmt.Errorf("%w: WithMaxKeys(%d) needs at least 1", ErrInvalidMaxKeys, o.maxKeys)
	}
	return o, nil
}

// WithMaxKeys sets the cap on the number of keys the table holds at once.
// It must be at least 1.
func WithMaxKeys(n int64) Option {
	return func(o *options) { o.maxKeys = n }
}
