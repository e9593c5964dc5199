package etcdsem

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A view is the state of one semaphore as of one revision: the config and
// every acquirer's key. The semaphore's rules are pure functions of a view
// (admitted, held, waiters), so that every handle computes the same answer
// from the same revision.
type view struct {
	rev     int64
	cfg     config            // mod is 0 if the config key is missing
	entries map[string]*entry // the acquirers' keys, by name
	// assumed is set on a view that a waiter derived from a grant it
	// watched rather than read: it is right only if the config did not
	// change since rev (see waiter.aheadTakesAll).
	assumed bool
}

// An entry is one acquirer's key: its weight and whether it holds or waits.
type entry struct {
	key    string
	create int64 // the key's create revision: its place in arrival order
	mod    int64 // the key's mod revision
	n      int64
	held   bool
}

// The values an acquirer's key holds: its state and its weight, e.g.
// "wait 3" or "held 3". A key that a batch grant turned to held also
// carries the grant's note after its weight (see grantNote).
const (
	waitState = "wait"
	heldState = "held"
)

// maxNoted is the most holders a grant's note lists. A grant that leaves
// more writes no list, and the waiter behind it reads the semaphore.
const maxNoted = 16

// A grantNote is what a batch grant writes into its grantees' keys beside
// their weight, so that the waiter that watches one of them as the waiter
// ahead learns from the watch event alone what the grant did: whether it
// granted that waiter too, and, where it did not, which keys held permits
// once it was made, which the waiter, now first in line, must watch. The
// note is exact at the grant's revision up to deletions: the keys that
// held in the view the grant was made from, and the keys it granted, are
// the only keys that can hold then.
//
// Each grantee's note names the grantee that follows it in the batch. The
// waiter that watches a grantee as the waiter ahead is granted too exactly
// when it is that next grantee: the keys between the two in arrival order
// are held or ask for more than the limit, so none of them is a grantee
// (the note is used only under the config the waiter's view has). A batch
// that goes on past the waiter without it did not find the waiter's key
// (its lease has ended), and one that ends with the key ahead leaves the
// waiter first in line.
//
// Its stored form follows the weight: the config's mod revision, the next
// grantee's create revision (0 for the batch's last waiter), and, in the
// last grantee's key only, "h" and one "name,mod,n" for every other key
// holding (name relative to the key directory; mod 0 for a key the grant
// itself wrote): "held 1 7 0 h 0a-1f-3,9,1 0b-2e-1,0,1".
type grantNote struct {
	cfgMod  int64    // the config's mod revision, which the grant compared
	next    int64    // the create revision of the next grantee; 0 after the last
	listed  bool     // holders is the list (absent where it would be too long)
	holders []*entry // the other keys holding at the grant (mod 0: the grant's own)
}

// grantValue returns the stored form of a key that a grant turns to
// held, n permits, with note; holders are listed only if note.listed.
func (s *Semaphore) grantValue(n int64, note *grantNote) string {
	var b strings.Builder
	b.WriteString(entryValue(true, n))
	fmt.Fprintf(&b, " %d %d", note.cfgMod, note.next)
	if note.listed {
		b.WriteString(" h")
		for _, e := range note.holders {
			fmt.Fprintf(&b, " %s,%d,%d", strings.TrimPrefix(e.key, s.keyDir), e.mod, e.n)
		}
	}
	return b.String()
}

// parseNote decodes the note that follows a held key's weight, or with
// keyDir empty only checks its form. It returns false for a malformed
// note; an empty text is a key without a note, and gives nil.
func parseNote(text, keyDir string) (*grantNote, bool) {
	if text == "" {
		return nil, true
	}
	cfgMod, rest, _ := strings.Cut(text, " ")
	next, rest, _ := strings.Cut(rest, " ")
	note := &grantNote{}
	var err1, err2 error
	note.cfgMod, err1 = strconv.ParseInt(cfgMod, 10, 64)
	note.next, err2 = strconv.ParseInt(next, 10, 64)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	if rest != "" {
		mark, list, _ := strings.Cut(rest, " ")
		if mark != "h" {
			return nil, false
		}
		note.listed = true
		for list != "" {
			var h string
			h, list, _ = strings.Cut(list, " ")
			name, rest, ok1 := strings.Cut(h, ",")
			mod, num, ok2 := strings.Cut(rest, ",")
			m, err1 := strconv.ParseInt(mod, 10, 64)
			n, err2 := strconv.ParseInt(num, 10, 64)
			if !ok1 || !ok2 || name == "" || err1 != nil || err2 != nil || m < 0 || n < 1 || n > MaxPermits {
				return nil, false
			}
			if keyDir != "" {
				note.holders = append(note.holders, &entry{key: keyDir + name, mod: m, n: n, held: true})
			}
		}
	}
	return note, true
}

func entryValue(held bool, n int64) string {
	if held {
		return heldState + " " + strconv.FormatInt(n, 10)
	}
	return waitState + " " + strconv.FormatInt(n, 10)
}

// viewOf builds the view at revision rev from every key under the prefix.
func (s *Semaphore) viewOf(rev int64, kvs []*mvccpb.KeyValue) (*view, error) {
	v := &view{rev: rev, entries: make(map[string]*entry, len(kvs))}
	for _, kv := range kvs {
		if err := s.apply(v, kv, false); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// apply brings one key's change into v: a put, or a deletion if deleted.
// It returns ErrForeignKeys for a key under the prefix that is neither the
// config nor a well-formed acquirer's key.
func (s *Semaphore) apply(v *view, kv *mvccpb.KeyValue, deleted bool) error {
	key := string(kv.Key)
	switch {
	case key == s.cfgKey:
		if deleted {
			v.cfg = config{}
			return nil
		}
		c, err := decodeConfig(key, kv.Value, kv.ModRevision)
		if err != nil {
			return err
		}
		v.cfg = c
		s.noteConfig(c)
	case strings.HasPrefix(key, s.keyDir) && len(key) > len(s.keyDir):
		if deleted {
			delete(v.entries, key)
			return nil
		}
		e, _, err := parseEntry(key, kv)
		if err != nil {
			return err
		}
		v.entries[key] = e
	case strings.HasPrefix(key, s.prefix+floorDir) && len(key) > len(s.prefix)+len(floorDir):
		// A handle's floor key: no part of the semaphore's state.
		if key == s.floor {
			s.noteFloor(kv.ModRevision)
		}
	default:
		return fmt.Errorf("%w: %q", ErrForeignKeys, key)
	}
	return nil
}

// parseEntry decodes an acquirer's key; note is what follows the weight
// of a held key that a batch grant wrote, and empty otherwise.
func parseEntry(key string, kv *mvccpb.KeyValue) (e *entry, note string, _ error) {
	state, rest, ok := strings.Cut(string(kv.Value), " ")
	num, note, _ := strings.Cut(rest, " ")
	n, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil || n < 1 || n > MaxPermits || (state != waitState && state != heldState) {
		return nil, "", fmt.Errorf("%w: %q holds %q", ErrForeignKeys, key, kv.Value)
	}
	if _, ok := parseNote(note, ""); !ok || (note != "" && state != heldState) {
		return nil, "", fmt.Errorf("%w: %q holds %q", ErrForeignKeys, key, kv.Value)
	}
	return &entry{key: key, create: kv.CreateRevision, mod: kv.ModRevision, n: n, held: state == heldState}, note, nil
}

// applyEvents brings a watch response's events into v, skipping those v
// already reflects.
func (s *Semaphore) applyEvents(v *view, events []*clientv3.Event) error {
	since := v.rev // a transaction's events share a revision: compare with v's own
	for _, ev := range events {
		if ev.Kv.ModRevision <= since {
			continue
		}
		if err := s.apply(v, ev.Kv, ev.Type == clientv3.EventTypeDelete); err != nil {
			return err
		}
		v.rev = max(v.rev, ev.Kv.ModRevision)
	}
	return nil
}

// read returns the semaphore's view at the current revision, in one round
// trip.
func (s *Semaphore) read(ctx context.Context) (*view, error) {
	rctx, cancel := s.rpcContext(ctx)
	defer cancel()
	resp, err := s.client.Get(rctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, s.rpcError(ctx, err)
	}
	return s.viewOf(resp.Header.Revision, resp.Kvs)
}

// held returns the permits that held keys hold.
func (v *view) held() int64 {
	var sum int64
	for _, e := range v.entries {
		if e.held {
			sum += e.n
		}
	}
	return sum
}

// holders returns the held entries.
func (v *view) holders() []*entry {
	var out []*entry
	for _, e := range v.entries {
		if e.held {
			out = append(out, e)
		}
	}
	return out
}

// waiters returns the number of waiting keys.
func (v *view) waiters() int {
	count := 0
	for _, e := range v.entries {
		if !e.held {
			count++
		}
	}
	return count
}

// queue returns the waiting entries in arrival order.
func (v *view) queue() []*entry {
	var q []*entry
	for _, e := range v.entries {
		if !e.held {
			q = append(q, e)
		}
	}
	slices.SortFunc(q, func(a, b *entry) int { return cmp.Compare(a.create, b.create) })
	return q
}

// admitted returns the waiters that the in-process rules grant in v, in
// arrival order, followed by arrival if it is admitted too (arrival is an
// acquirer not yet in v, behind every waiter; nil for none).
//
// The rules walk the waiters in arrival order with the permits free:
//   - one that asks for more than the limit is passed over: no release can
//     serve it, so it must not hold back the others;
//   - one that fits the free permits is granted, and they shrink by its
//     weight;
//   - one that fits the limit but not the free permits stops the walk: it
//     holds back everyone behind it, so that a stream of small requests
//     cannot starve it.
//
// A closed semaphore admits no one.
//
// Why a grant made from an older view is still right when it commits:
// a grant commits only if the config is unchanged since its view and each
// grantee's key is still the waiting key the view saw (see grant). The
// other changes that can come between only admit more: a key deleted or
// lowered in weight frees permits or removes a waiter, and a key created
// later joins behind every grantee (an arrival that TryAcquire grants at
// once is refused if any key was created after its view). No other grant
// can come between either: a batch always starts with the first waiter
// the rules admit, its head, and every key ahead of the head is held or
// passed over, which stays so while the config does; so any other grant
// made while the head still waits names the head too, and of two grants
// that name the same key only the first commits.
func (v *view) admitted(arrival *entry) []*entry {
	if v.cfg.Closed {
		return nil
	}
	limit := v.cfg.Limit
	free := limit - v.held()
	var out []*entry
	walk := v.queue()
	if arrival != nil {
		walk = append(walk, arrival)
	}
	for _, e := range walk {
		if e.n > limit {
			continue
		}
		if e.n > free {
			break
		}
		free -= e.n
		out = append(out, e)
	}
	return out
}

// follow starts a watch on the semaphore, bound to watchCtx, and returns
// it with a view that the watch's events carry on from: v itself if
// nothing changed between v's revision and the watch's start, or else a
// view read afresh (v may be nil). stop ends the watch. The round trips
// are made for a caller whose context is ctx.
//
// The watch asks for no start revision. etcd serves a watch that starts
// in the past from a loop that catches up every 100 ms, while one that
// starts now is fed each change as it is made; so following from the
// present and reading again when the present has moved on costs a round
// trip at most, instead of up to 100 ms.
func (s *Semaphore) follow(ctx, watchCtx context.Context, v *view) (watch clientv3.WatchChan, stop context.CancelFunc, _ *view, err error) {
	// A watch that requires a leader ends when its member loses quorum,
	// instead of waiting quietly on a member that hears of no change.
	wctx, stop := context.WithCancel(clientv3.WithRequireLeader(watchCtx))
	watch = s.client.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	var created clientv3.WatchResponse
	rctx, cancel := s.rpcContext(ctx)
	defer cancel()
	select {
	case resp, ok := <-watch:
		if !ok || !resp.Created || resp.Err() != nil {
			stop()
			if err := ctx.Err(); err != nil {
				return nil, nil, nil, err
			}
			return nil, nil, nil, s.rpcError(ctx, fmt.Errorf("watching %q: %v", s.prefix, resp.Err()))
		}
		created = resp
	case <-rctx.Done():
		stop()
		return nil, nil, nil, s.rpcError(ctx, rctx.Err())
	}
	// The watch reports every change after some revision no later than
	// the one its creation reports.
	if v == nil || created.Header.Revision > v.rev {
		if v, err = s.read(ctx); err != nil {
			stop()
			return nil, nil, nil, err
		}
	}
	return watch, stop, v, nil
}
