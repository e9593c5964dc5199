package etcdsem

import (
	"context"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// WalkKey is one acquirer's key for Admitted: its weight and whether it
// holds permits.
type WalkKey struct {
	Name string
	N    int64
	Held bool
}

// Admitted runs the grant rules on a view with the given limit and closed
// flag, whose keys arrived in the order given, and returns the names of
// the waiters it admits, followed by arrival's if arrival (an acquirer
// behind them all, not yet in the view) is admitted too.
func Admitted(limit int64, closed bool, keys []WalkKey, arrival *WalkKey) []string {
	v := &view{cfg: config{Limit: limit, Max: MaxPermits, Closed: closed}, entries: make(map[string]*entry)}
	for i, k := range keys {
		v.entries[k.Name] = &entry{key: k.Name, create: int64(i + 1), n: k.N, held: k.Held}
	}
	var arr *entry
	if arrival != nil {
		arr = &entry{key: arrival.Name, create: int64(len(keys) + 1), n: arrival.N}
	}
	var names []string
	for _, e := range v.admitted(arr) {
		names = append(names, e.key)
	}
	return names
}

// Floor returns what the handle knows of its floor key: the value that
// the writes it sends now compare with.
func Floor(s *Semaphore) int64 { return s.floorMod.Load() }

// Arrive is one attempt of Acquire's first round trip, sent as it would
// have been when the handle knew floor, asking for no grant: it writes key
// as a waiter for n permits if the config is as the handle knows it and
// the floor key is as floor says, and reports whether it did.
func Arrive(ctx context.Context, s *Semaphore, key string, n int64, floor int64) (bool, error) {
	resp, err := s.arrival(ctx, key, n, s.cachedConfig(), floor, false)
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// CleanUp is what an Acquire that gives up does to its key.
func CleanUp(ctx context.Context, s *Semaphore, key string) {
	s.cleanUp(ctx, key, nil)
}

// GRPCCode is grpcCode, for tests.
var GRPCCode = grpcCode

// NewKey returns a key name for the handle's next acquirer.
func NewKey(s *Semaphore) string { return s.newKey() }

// TryAcquireAfter is TryAcquire with between called after it has read the
// semaphore and before it grants: a test makes changes there that the
// read did not see.
func TryAcquireAfter(ctx context.Context, s *Semaphore, n int64, between func()) (bool, error) {
	v, err := s.read(ctx)
	if err != nil {
		return false, err
	}
	between()
	tok, ok, err := s.tryFrom(ctx, n, v)
	if ok {
		tok.Release()
	}
	return ok, err
}

// An EventWaiter is a waiter on a view built from keys, without etcd, to
// which a test feeds watch events: Put, Delete and SetLimit each report
// whether the waiter brought the event into its view (true) or must read
// the semaphore again (false).
type EventWaiter struct {
	w   *waiter
	v   *view
	rev int64

	batch   []*clientv3.Event // the events fed inside Batch, not yet absorbed
	inBatch bool
}

// NewEventWaiter returns a waiter named me on a semaphore with the given
// limit whose keys arrived in the order given (me among them), watching
// the keys named in watched and the config.
func NewEventWaiter(limit int64, keys []WalkKey, me string, watched []string) *EventWaiter {
	s := &Semaphore{prefix: "/p/", cfgKey: "/p/config", keyDir: "/p/k/", parked: make(map[*waiter]struct{})}
	c := config{Limit: limit, Max: MaxPermits, mod: 1}
	c.value = c.encode()
	v := &view{cfg: c, entries: make(map[string]*entry)}
	for i, k := range keys {
		rev := int64(i + 2)
		v.entries[s.keyDir+k.Name] = &entry{key: s.keyDir + k.Name, create: rev, mod: rev, n: k.N, held: k.Held}
	}
	v.rev = int64(len(keys) + 1)
	w := &waiter{s: s, key: s.keyDir + me, ctx: context.Background(), watches: map[string]*keyWatch{s.cfgKey: {key: s.cfgKey}}}
	for _, k := range watched {
		w.watches[s.keyDir+k] = &keyWatch{key: s.keyDir + k}
	}
	return &EventWaiter{w: w, v: v, rev: v.rev}
}

func (t *EventWaiter) feed(typ mvccpb.Event_EventType, kv *mvccpb.KeyValue) bool {
	t.rev++
	kv.ModRevision = t.rev
	if t.inBatch {
		t.batch = append(t.batch, &clientv3.Event{Type: typ, Kv: kv})
		return true
	}
	return t.absorb([]*clientv3.Event{{Type: typ, Kv: kv}})
}

func (t *EventWaiter) absorb(events []*clientv3.Event) bool {
	ok, err := t.w.absorb(t.v, events)
	if err != nil {
		panic(err)
	}
	return ok
}

// Batch feeds the events that feed makes (through Put, Grant, Delete and
// SetLimit, whose results it ignores) as one watch response, as a watch
// that catches up delivers them, and reports whether the waiter brought
// them into its view.
func (t *EventWaiter) Batch(feed func()) bool {
	t.inBatch = true
	feed()
	t.inBatch = false
	events := t.batch
	t.batch = nil
	return t.absorb(events)
}

// Put feeds a put of the acquirer's key name, created at the revision it
// had in the view.
func (t *EventWaiter) Put(name string, held bool, n int64) bool {
	key := t.w.s.keyDir + name
	create := t.rev + 1
	if e := t.v.entries[key]; e != nil {
		create = e.create
	}
	return t.feed(mvccpb.PUT, &mvccpb.KeyValue{Key: []byte(key), CreateRevision: create, Value: []byte(entryValue(held, n))})
}

// Grant feeds the grant of the waiting key name, n permits, by a batch
// whose note names next as the grantee after it ("" for none: name is the
// batch's last) and, unless holders is nil, lists holders (by name, each
// with its mod revision in the view, 0 for a key the grant wrote).
// underCfg says whether the note was written under the config the view
// has.
func (t *EventWaiter) Grant(name string, n int64, next string, holders []string, underCfg bool) bool {
	key := t.w.s.keyDir + name
	note := &grantNote{cfgMod: t.v.cfg.mod, listed: holders != nil}
	if next != "" {
		note.next = t.v.entries[t.w.s.keyDir+next].create
	}
	if !underCfg {
		note.cfgMod++
	}
	for _, h := range holders {
		e := &entry{key: t.w.s.keyDir + h, n: 1}
		if old := t.v.entries[e.key]; old != nil && old.held {
			e.mod, e.n = old.mod, old.n
		}
		note.holders = append(note.holders, e)
	}
	value := t.w.s.grantValue(n, note)
	return t.feed(mvccpb.PUT, &mvccpb.KeyValue{Key: []byte(key), CreateRevision: t.v.entries[key].create, Value: []byte(value)})
}

// Delete feeds the deletion of the acquirer's key name.
func (t *EventWaiter) Delete(name string) bool {
	return t.feed(mvccpb.DELETE, &mvccpb.KeyValue{Key: []byte(t.w.s.keyDir + name)})
}

// SetLimit feeds a change of the config's limit.
func (t *EventWaiter) SetLimit(limit int64) bool {
	c := config{Limit: limit, Max: MaxPermits}
	return t.feed(mvccpb.PUT, &mvccpb.KeyValue{Key: []byte(t.w.s.cfgKey), CreateRevision: 1, Value: []byte(c.encode())})
}

// Mods returns the mod revisions of the acquirers' keys the waiter's view
// holds, by name.
func (t *EventWaiter) Mods() map[string]int64 {
	out := make(map[string]int64, len(t.v.entries))
	for _, e := range t.v.entries {
		out[strings.TrimPrefix(e.key, t.w.s.keyDir)] = e.mod
	}
	return out
}

// Keys returns the acquirers' keys the waiter's view holds, by name, as
// "held N" or "wait N".
func (t *EventWaiter) Keys() map[string]string {
	out := make(map[string]string, len(t.v.entries))
	for _, e := range t.v.entries {
		out[strings.TrimPrefix(e.key, t.w.s.keyDir)] = entryValue(e.held, e.n)
	}
	return out
}
