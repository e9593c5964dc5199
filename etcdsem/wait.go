package etcdsem

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A waiter is an Acquire whose key is written and not yet granted. It
// looks at the semaphore as of its key's creation first; while the rules
// do not admit it, it watches only the keys whose change can admit it, and
// grants itself, with the waiters admitted ahead of it, as soon as the
// rules do.
//
// # What a waiter watches
//
// The rules admit a waiter only after every waiter ahead of it that fits
// the limit, so while one of those waits, nothing else can admit it: the
// waiter watches the nearest such waiter ahead (whose key is granted or
// deleted first). A waiter with none ahead of it waits for permits: it
// watches the keys that hold them, since only a release frees them; no
// key can be granted ahead of it meanwhile, so no other key comes to hold
// permits while it waits. Every waiter also watches the config: a lower
// limit passes waiters over, a higher one frees permits, and Close ends
// the wait. So each change wakes only the waiters it can admit: a release
// wakes the first in line, and its grant wakes the next. The grant leaves
// a note in the keys it grants (see grantNote), from which the next
// learns, without a read, whether the batch granted it too or, now first
// in line, which keys can hold: it watches them and compares them once,
// reading the semaphore only if one has changed (see handOff). The key it
// watched as the one ahead is among them, and its watch goes on. Where
// that grant took the whole limit, its key is the only holder and there
// is nothing to compare (see aheadTakesAll for a grant without a note).
//
// Each watch starts at the present: etcd sends changes as they are made on
// a watch that starts at a revision it has not yet reached, but serves one
// that starts at a past revision from a loop that catches up every 100 ms,
// and under contention the revision a waiter read is past by the time its
// watch reaches etcd. When a watch starts later than the view it was
// chosen from, the waiter checks that what it watches is as the view has
// it, and reads the semaphore if not, so no change in between is missed.
//
// A waiter whose process dies while first in line holds back those
// behind it until its lease runs out and etcd deletes its key, which wakes
// the next.
type waiter struct {
	s      *Semaphore
	key    string
	n      int64
	ctx    context.Context
	create int64 // the key's create revision
	fenced bool  // the caller wants a loss signal on its token

	watches map[string]*keyWatch // by key: the open watches, the config's among them
	cases   []reflect.SelectCase // the watches' channels, for follow; rebuilt when they change

	// The fields below are written by the waiter's own goroutine under mu,
	// so that Parked can tell a waiter that has seen
	// every change it watches for and waits for the next.
	mu      sync.Mutex
	view    *view    // the view last assessed
	watched []string // the keys watched, the config's first
	idle    bool     // waiting for a change
}

// A keyWatch is a waiter's watch on one key.
type keyWatch struct {
	key    string
	ch     clientv3.WatchChan
	cancel context.CancelFunc
}

// step is what a waiter makes of one view of the semaphore.
type step struct {
	me       *entry   // the waiter's key; nil if it is gone
	closed   bool     // the semaphore is closed
	cfg      config   // the config, for a grant's compare
	grantees []*entry // the waiters to grant, if the rules admit this one
}

// assess looks at v for the waiter. v must not change meanwhile.
func (w *waiter) assess(v *view) step {
	st := step{me: v.entries[w.key], closed: v.cfg.Closed, cfg: v.cfg}
	if st.me != nil && !st.me.held && !st.closed {
		if g := v.admitted(nil); slices.Contains(g, st.me) {
			st.grantees = g[:min(len(g), grantBatch)]
		}
	}
	return st
}

// targets returns the keys whose change can admit the waiter in v, the
// config's first.
func (w *waiter) targets(v *view) []string {
	out := []string{w.s.cfgKey}
	me := v.entries[w.key]
	if me == nil || me.n > v.cfg.Limit {
		return out // only a higher limit can admit it
	}
	var ahead *entry
	for _, e := range v.entries {
		if !e.held && e.create < me.create && e.n <= v.cfg.Limit && (ahead == nil || e.create > ahead.create) {
			ahead = e
		}
	}
	if ahead != nil {
		return append(out, ahead.key)
	}
	for _, e := range v.entries {
		if e.held {
			out = append(out, e.key)
		}
	}
	return out
}

// wait follows the semaphore from v, the view the waiter's arrival read,
// until the waiter's key is held, then returns the token's owner; or
// until the waiter must give up, and then deletes the key and returns why.
func (w *waiter) wait(v *view) (*holding, error) {
	s, ctx := w.s, w.ctx
	s.park(w)
	defer s.unpark(w)
	defer w.unwatch()
	for {
		st := w.assess(v)
		switch {
		case st.me == nil:
			// Only the lease's end deletes a waiter's key.
			return nil, s.lostKey(w.key)
		case st.me.held:
			return w.granted(st.me.mod)
		case st.closed:
			return nil, s.takeBack(ctx, w.key, w.create, ErrClosed)
		case st.grantees != nil:
			// Admitted: grant the batch, from its head. Another waiter of
			// the batch may send the same grant; only the first commits,
			// and the other finds itself held.
			resp, err := s.grant(ctx, grantReq{
				cfg: st.cfg, grantees: st.grantees, holders: v.holders(),
				orElse: []clientv3.Op{clientv3.OpGet(s.prefix, clientv3.WithPrefix())},
			})
			if err != nil {
				return nil, s.takeBack(ctx, w.key, w.create, s.rpcError(ctx, err))
			}
			if resp.Succeeded && slices.Contains(st.grantees, st.me) {
				return w.granted(resp.Header.Revision)
			}
			// Either the view was out of date, or the batch ended before
			// this waiter: look again.
			if resp.Succeeded {
				v, err = s.read(ctx)
			} else {
				v, err = s.viewOf(resp.Header.Revision, resp.Responses[0].GetResponseRange().Kvs)
			}
			if err != nil {
				return nil, s.takeBack(ctx, w.key, w.create, err)
			}
			continue
		}
		var err error
		if v, err = w.follow(v); err != nil {
			return nil, s.takeBack(ctx, w.key, w.create, err)
		}
	}
}

// follow waits, from view v, for a change that can admit the waiter, and
// returns the view that shows it.
func (w *waiter) follow(v *view) (*view, error) {
	s := w.s
	keys := w.targets(v)
	if w.watch(v, keys) {
		// A watch started after v's revision: what it watches may have
		// changed in between. Look again; the watches carry on from it.
		return w.recheck(v, keys)
	}
	w.mu.Lock()
	w.view, w.watched, w.idle = v, keys, true
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.idle = false
		w.mu.Unlock()
	}()
	fixed := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.session.Done())},
	}
	cases := append(fixed, w.cases...)
	for {
		i, got, ok := reflect.Select(cases)
		switch i {
		case 0:
			return nil, w.ctx.Err()
		case 1:
			return nil, s.Err() // the key goes with the lease
		}
		resp := clientv3.WatchResponse{}
		if ok {
			resp = got.Interface().(clientv3.WatchResponse)
		}
		if !ok || resp.Err() != nil {
			// The watch ended: no leader, a compacted revision, or a
			// closed client. Read afresh and watch again.
			w.unwatch()
			return w.reread()
		}
		if !changes(v, resp.Events) {
			continue // a change that the view already shows
		}
		if ok, err := w.absorb(v, resp.Events); ok || err != nil {
			return v, err
		}
		return s.read(w.ctx)
	}
}

// recheck returns v if none of keys, the keys the waiter watches in v,
// has changed since v, and otherwise the semaphore's view read afresh, in
// one round trip. v then stays exact for every key that can admit the
// waiter, so the waiter need not read the others' keys: one transaction
// compares the watched keys' mod revisions with v's and reads the prefix
// only if one differs.
func (w *waiter) recheck(v *view, keys []string) (*view, error) {
	s := w.s
	cmps := make([]clientv3.Cmp, 0, len(keys))
	for _, key := range keys {
		var mod int64 // a key that is gone compares as 0
		if key == s.cfgKey {
			mod = v.cfg.mod
		} else if e := v.entries[key]; e != nil {
			mod = e.mod
		}
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", mod))
	}
	rctx, cancel := s.rpcContext(w.ctx)
	defer cancel()
	resp, err := s.client.Txn(rctx).If(cmps...).Else(clientv3.OpGet(s.prefix, clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, s.rpcError(w.ctx, err)
	}
	if resp.Succeeded {
		return v, nil
	}
	return s.viewOf(resp.Header.Revision, resp.Responses[0].GetResponseRange().Kvs)
}

// reread reads the semaphore afresh for a waiter whose watch ended,
// trying again while etcd does not answer: a waiter keeps its place
// through an outage (a restart, a leader election) for as long as its
// context and its session last.
func (w *waiter) reread() (*view, error) {
	backoff := minBackoff
	for {
		v, err := w.s.read(w.ctx)
		if !errors.Is(err, ErrUnavailable) {
			return v, err
		}
		select {
		case <-time.After(backoff):
		case <-w.ctx.Done():
			return nil, w.ctx.Err()
		case <-w.s.session.Done():
			return nil, w.s.Err()
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// targetsHold reports whether the waiter watches the holders in v: it is
// first in line, so its view is exact for every key that can change.
func (w *waiter) targetsHold(v *view) bool {
	for key := range w.watches {
		if e := v.entries[key]; e != nil && !e.held {
			return false
		}
	}
	me := v.entries[w.key]
	return me != nil && me.n <= v.cfg.Limit
}

// absorb brings events into v where that leaves v exact for every key that
// can admit the waiter, and reports whether it did; otherwise the waiter
// reads the semaphore again. So it does for a holder's release or a config
// change seen by the first in line, which watches every key that can admit
// it, and for a grant that leaves the key ahead of it the only holder
// (aheadTakesAll). The view keeps its revision, so that a watch chosen
// from it later starts early enough to see the changes to keys it did not
// watch.
//
// A key that events create is left out of v: handles use key names again,
// so a watch on a holder's key can deliver the deletion of the key and
// then a new key of the same name, a later arrival, which is behind the
// waiter and cannot admit it. The view does not hold the other keys that
// arrived since its revision, which may be ahead of that one; a batch
// grant computed with it would let it overtake them.
func (w *waiter) absorb(v *view, events []*clientv3.Event) (bool, error) {
	if v.assumed && touches(v, events, w.s.cfgKey) {
		return false, nil // the view's holders rest on the config being unchanged
	}
	if w.handOff(v, events) {
		return true, nil
	}
	if !w.aheadTakesAll(v, events) && !w.targetsHold(v) {
		return false, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	rev := v.rev
	err := w.s.applyEvents(v, events)
	v.rev = rev
	for key, e := range v.entries {
		if e.create > rev && key != w.key {
			delete(v.entries, key)
		}
	}
	return true, err
}

// aheadTakesAll reports whether events show the waiter ahead in v granted
// the whole limit, and if so makes v the view as of that grant, so that
// the waiter, now first in line, need not read the semaphore to learn the
// holders: the rules admit a grant only while the permits held beside it
// fit the limit, so with the config unchanged the key ahead is then the
// only holder, and every key ahead of it is held or gone (grants are in
// arrival order), so gone. The config's being unchanged since v is not
// known here; every grant compares it, so a grant made from this view
// commits only if it was (and then the view was right at the grant), and
// a change to the config seen meanwhile makes the waiter read again.
func (w *waiter) aheadTakesAll(v *view, events []*clientv3.Event) bool {
	me, ahead, e, _ := w.aheadGranted(v, events)
	if e == nil || e.n != v.cfg.Limit {
		return false
	}
	w.mu.Lock()
	w.dropAhead(v, me, ahead)
	v.assumed = true
	w.mu.Unlock()
	return true
}

// aheadGranted looks for what aheadTakesAll and handOff build on: events
// that are, past v, one put that turns the waiter ahead in v to held. It
// returns the waiter's entry, the one ahead as v has it, that key as the
// put leaves it and the note the put carries; e is nil if events are not
// such a put or the waiter is not waiting for one.
func (w *waiter) aheadGranted(v *view, events []*clientv3.Event) (me, ahead, e *entry, note string) {
	me = v.entries[w.key]
	if me == nil || me.held || me.n > v.cfg.Limit || v.cfg.Closed {
		return nil, nil, nil, ""
	}
	// A watch that catches up (after a reconnect, or one that started in
	// the past) delivers several changes in one response: the grant and
	// the release that followed it, say. Only a response whose one change
	// past v is the grant says what the semaphore is as of that grant.
	var first *clientv3.Event
	for _, ev := range events {
		if ev.Kv.ModRevision <= v.rev {
			continue
		}
		if first != nil {
			return nil, nil, nil, ""
		}
		first = ev
	}
	if first == nil || first.Type != clientv3.EventTypePut {
		return nil, nil, nil, ""
	}
	key := string(first.Kv.Key)
	ahead = v.entries[key]
	if ahead == nil || ahead.held || ahead.create != first.Kv.CreateRevision || ahead.create >= me.create {
		return nil, nil, nil, ""
	}
	e, note, err := parseEntry(key, first.Kv)
	if err != nil || !e.held {
		return nil, nil, nil, ""
	}
	return me, ahead, e, note
}

// dropAhead removes from v every key but the waiter's own and the one
// ahead that held, or waited ahead of the waiter and fit the limit: once
// the waiter ahead is granted, those are granted or gone, and v no longer
// knows which. It requires that w.mu is held.
func (w *waiter) dropAhead(v *view, me, ahead *entry) {
	for k, o := range v.entries {
		if o != me && o != ahead && (o.held || (o.create < me.create && o.n <= v.cfg.Limit)) {
			delete(v.entries, k)
		}
	}
}

// handOff brings into v the grant of the waiter ahead from the note the
// grant wrote (see grantNote), and reports whether it did. The note was
// written under the config v has, or handOff does nothing. Where the
// note names the waiter as the grantee after the key ahead, the waiter is
// granted too, at the grant's revision (the grant compared its key, so it
// was still waiting). Where it names another, the grant's view did not
// hold the waiter's key, and the waiter reads the semaphore to find out
// why. Where it names none, the batch ended with the key ahead:
// the waiter is now first in line, and the note lists the keys that can
// hold: v becomes those keys and the waiter's own, instead of a read of
// the semaphore. A listed key may have been deleted since the grant's
// view, unseen: v keeps its revision, so the watches the waiter opens on
// the listed keys, all later than the grant, start later than v, and the
// waiter compares the listed keys once before it waits on them (see
// follow). The key ahead needs no compare: its watch is older than its
// grant.
func (w *waiter) handOff(v *view, events []*clientv3.Event) bool {
	me, ahead, e, text := w.aheadGranted(v, events)
	if e == nil {
		return false
	}
	note, ok := parseNote(text, w.s.keyDir)
	if !ok || note == nil || note.cfgMod != v.cfg.mod {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch note.next {
	case me.create:
		v.entries[w.key] = &entry{key: w.key, create: me.create, mod: e.mod, n: me.n, held: true}
		return true
	case 0:
	default:
		return false // the batch went on without the waiter's key: read it
	}
	if !note.listed {
		return false
	}
	w.dropAhead(v, me, ahead)
	v.entries[ahead.key] = e
	for _, h := range note.holders {
		if h.mod == 0 {
			h.mod = e.mod
		}
		v.entries[h.key] = h
	}
	v.assumed = false
	return true
}

// touches reports whether events hold a change to key later than v.
func touches(v *view, events []*clientv3.Event, key string) bool {
	for _, ev := range events {
		if ev.Kv.ModRevision > v.rev && string(ev.Kv.Key) == key {
			return true
		}
	}
	return false
}

// changes reports whether events hold a change later than v.
func changes(v *view, events []*clientv3.Event) bool {
	for _, ev := range events {
		if ev.Kv.ModRevision > v.rev {
			return true
		}
	}
	return false
}

// watch leaves the waiter watching keys, keeping the watches it has and
// starting the others at the present, and reports whether one of those
// started after v's revision (or could not start), so that a change
// between v and the watch may have been missed.
func (w *waiter) watch(v *view, keys []string) (moved bool) {
	if w.watches == nil {
		w.watches = make(map[string]*keyWatch, len(keys))
	}
	changed := false
	for key, kw := range w.watches {
		if !slices.Contains(keys, key) {
			kw.cancel()
			delete(w.watches, key)
			changed = true
		}
	}
	var opened []*keyWatch
	for _, key := range keys {
		if w.watches[key] == nil {
			ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(w.ctx))
			ch := w.s.client.Watch(ctx, key, clientv3.WithCreatedNotify())
			kw := &keyWatch{key: key, ch: ch, cancel: cancel}
			w.watches[key] = kw
			opened = append(opened, kw)
			changed = true
		}
	}
	for _, kw := range opened {
		select {
		case resp, ok := <-kw.ch:
			if !ok || !resp.Created || resp.Err() != nil || resp.Header.Revision > v.rev {
				moved = true
			}
		case <-w.ctx.Done():
			moved = true // follow's read returns ctx.Err()
		case <-w.s.session.Done():
			moved = true // follow's read returns ErrSessionLost
		}
	}
	if changed {
		w.cases = w.cases[:0]
		for _, kw := range w.watches {
			w.cases = append(w.cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(kw.ch)})
		}
	}
	return moved
}

// unwatch ends the waiter's watches.
func (w *waiter) unwatch() {
	for key, kw := range w.watches {
		kw.cancel()
		delete(w.watches, key)
	}
	w.cases = w.cases[:0]
}

// granted returns the owner of the token for the waiter's key, held since
// revision mod, unless the waiter's context is done: a done context wins
// over a grant, and the permits go back.
func (w *waiter) granted(mod int64) (*holding, error) {
	if err := w.ctx.Err(); err != nil {
		return nil, w.s.takeBack(w.ctx, w.key, w.create, err)
	}
	return w.s.hold(w.key, w.n, w.create, mod, w.fenced), nil
}

// park and unpark list and unlist a waiting Acquire, for Parked.
func (s *Semaphore) park(w *waiter) {
	s.mu.Lock()
	s.parked[w] = struct{}{}
	s.mu.Unlock()
}

func (s *Semaphore) unpark(w *waiter) {
	s.mu.Lock()
	delete(s.parked, w)
	s.mu.Unlock()
}
