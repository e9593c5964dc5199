package etcdsem_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The history check. A recorder watches a semaphore's prefix from the
// first revision and keeps every event; checkHistory replays them, one
// revision at a time, against a model of the in-process rules written
// here independently of the package's own, and reports the first change
// the rules do not allow. Every grant is checked at the revision etcd
// committed it: the keys it turned to held (or created held) must be,
// in arrival order, a prefix of the waiters that the rules admit in the
// state just before, so that no grant passes the limit in force, overtakes
// a waiter that fits, or comes after Close.

// recorder keeps every event under a prefix.
type recorder struct {
	cli    *clientv3.Client
	prefix string
	cancel context.CancelFunc
	done   chan struct{}
	events []*clientv3.Event // written by the recorder's goroutine until done
	err    error
	seen   chan int64 // progress: the revisions the watch has reached
}

// record starts recording prefix's history on srv, from its first revision.
func record(t *testing.T, srv *server, prefix string) *recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{
		cli:    newClient(t, srv, nil),
		prefix: prefix,
		cancel: cancel,
		done:   make(chan struct{}),
		seen:   make(chan int64, 1),
	}
	watch := r.cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(1), clientv3.WithProgressNotify())
	go func() {
		defer close(r.done)
		for resp := range watch {
			if err := resp.Err(); err != nil {
				r.err = err
				return
			}
			r.events = append(r.events, resp.Events...)
			select {
			case <-r.seen:
			default:
			}
			r.seen <- resp.Header.Revision
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// stop waits until the recording has caught up with the server's current
// revision, then stops it and returns the events.
func (r *recorder) stop(t *testing.T) []*clientv3.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := r.cli.Get(ctx, r.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	want := resp.Header.Revision
	for caughtUp := false; !caughtUp; {
		require.NoError(t, r.cli.RequestProgress(ctx))
		select {
		case rev := <-r.seen:
			caughtUp = rev >= want
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("the recording did not catch up")
		case <-r.done:
			t.Fatalf("the recording ended: %v", r.err)
		}
	}
	r.cancel()
	<-r.done
	return r.events
}

// model is the state of a semaphore as the history check replays it.
type model struct {
	cfgKey string
	hasCfg bool
	limit  int64
	max    int64
	closed bool
	keys   map[string]modelKey
	floors string // where the handles' floor keys live
}

type modelKey struct {
	name   string
	create int64
	n      int64
	held   bool
}

func (m *model) clone() *model {
	c := *m
	c.keys = maps.Clone(m.keys)
	return &c
}

// admitted returns the names the in-process rules grant in m, in arrival
// order, arrival last if it is admitted (arrival may be nil).
func (m *model) admitted(arrival *modelKey) []string {
	if m.closed {
		return nil
	}
	var queue []modelKey
	free := m.limit
	for _, k := range m.keys {
		if k.held {
			free -= k.n
		} else {
			queue = append(queue, k)
		}
	}
	slices.SortFunc(queue, func(a, b modelKey) int { return cmp.Compare(a.create, b.create) })
	if arrival != nil {
		queue = append(queue, *arrival)
	}
	var out []string
	for _, k := range queue {
		if k.n > m.limit {
			continue // no release can serve it: it holds back no one
		}
		if k.n > free {
			break // it fits the limit: it holds back everyone behind it
		}
		free -= k.n
		out = append(out, k.name)
	}
	return out
}

// historyStats sums up a history that checkHistory accepted.
type historyStats struct {
	revisions, grants, batches, limitMoves int
	maxBatch                               int
}

// checkHistory replays events, the history of the semaphore under prefix,
// and returns the first change the rules do not allow.
func checkHistory(prefix string, events []*clientv3.Event) (historyStats, error) {
	m := &model{cfgKey: prefix + "config", keys: make(map[string]modelKey), floors: prefix + "f/"}
	var st historyStats
	for i := 0; i < len(events); {
		rev := events[i].Kv.ModRevision
		j := i
		for j < len(events) && events[j].Kv.ModRevision == rev {
			j++
		}
		if err := m.step(rev, events[i:j], &st); err != nil {
			return st, fmt.Errorf("revision %d: %w", rev, err)
		}
		st.revisions++
		i = j
	}
	return st, nil
}

// step applies the events of one revision and checks them.
func (m *model) step(rev int64, events []*clientv3.Event, st *historyStats) error {
	before := m.clone()
	var granted []modelKey
	var arrival *modelKey
	for _, ev := range events {
		key := string(ev.Kv.Key)
		if key == m.cfgKey {
			if err := m.applyConfig(ev); err != nil {
				return err
			}
			if before.hasCfg && m.limit != before.limit {
				st.limitMoves++
			}
			continue
		}
		if strings.HasPrefix(key, m.floors) {
			continue // a handle's floor key: no part of the state
		}
		if ev.Type == clientv3.EventTypeDelete {
			delete(m.keys, key)
			continue
		}
		k, err := parseModelKey(ev.Kv)
		if err != nil {
			return err
		}
		old, existed := before.keys[key]
		switch {
		case !existed && !k.held:
			if before.closed {
				return fmt.Errorf("%s waits on a closed semaphore", key)
			}
		case !existed && k.held:
			if k.create != rev {
				return fmt.Errorf("%s appears held but was created at %d", key, k.create)
			}
			arrival = &k
			granted = append(granted, k)
		case old.held && !k.held:
			return fmt.Errorf("%s went from held back to waiting", key)
		case !old.held && k.held:
			if k.n != old.n {
				return fmt.Errorf("%s was granted %d but asked for %d", key, k.n, old.n)
			}
			granted = append(granted, k)
		case old.held && k.n >= old.n:
			return fmt.Errorf("%s rose from %d to %d permits while held", key, old.n, k.n)
		case !old.held && k.n != old.n:
			return fmt.Errorf("%s changed its request from %d to %d", key, old.n, k.n)
		}
		m.keys[key] = k
	}
	if len(granted) == 0 {
		return nil
	}
	slices.SortFunc(granted, func(a, b modelKey) int { return cmp.Compare(a.create, b.create) })
	want := before.admitted(arrival)
	if len(granted) > len(want) {
		return fmt.Errorf("granted %v, but the rules admit only %v (limit %d, closed %v)",
			names(granted), want, before.limit, before.closed)
	}
	for i, k := range granted {
		if want[i] != k.name {
			return fmt.Errorf("granted %v, but the rules admit %v in that order (limit %d)", names(granted), want, before.limit)
		}
	}
	st.grants += len(granted)
	st.batches++
	st.maxBatch = max(st.maxBatch, len(granted))
	return nil
}

func (m *model) applyConfig(ev *clientv3.Event) error {
	if ev.Type == clientv3.EventTypeDelete {
		return fmt.Errorf("the config was deleted")
	}
	var c struct {
		Limit  int64 `json:"limit"`
		Max    int64 `json:"max"`
		Closed bool  `json:"closed"`
	}
	if err := json.Unmarshal(ev.Kv.Value, &c); err != nil {
		return fmt.Errorf("config %q: %w", ev.Kv.Value, err)
	}
	switch {
	case c.Limit < 0 || c.Limit > c.Max:
		return fmt.Errorf("limit %d outside [0, %d]", c.Limit, c.Max)
	case m.hasCfg && c.Max != m.max:
		return fmt.Errorf("max moved from %d to %d", m.max, c.Max)
	case m.closed && !c.Closed:
		return fmt.Errorf("a closed semaphore reopened")
	}
	m.hasCfg, m.limit, m.max, m.closed = true, c.Limit, c.Max, c.Closed
	return nil
}

func parseModelKey(kv *mvccpb.KeyValue) (modelKey, error) {
	// A held key may carry its grant's note after the weight.
	state, rest, _ := strings.Cut(string(kv.Value), " ")
	num, _, _ := strings.Cut(rest, " ")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || (state != "wait" && state != "held") {
		return modelKey{}, fmt.Errorf("%s holds %q", kv.Key, kv.Value)
	}
	return modelKey{name: string(kv.Key), create: kv.CreateRevision, n: n, held: state == "held"}, nil
}

func names(keys []modelKey) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.name)
	}
	return out
}

// The history check itself must catch a history that breaks the rules:
// each case below is a valid history with one change made wrong.
func TestHistoryCheckCatchesBrokenHistories(t *testing.T) {
	const p = "/s/"
	put := func(rev, create int64, key, value string) *clientv3.Event {
		return &clientv3.Event{Type: clientv3.EventTypePut, Kv: &mvccpb.KeyValue{
			Key: []byte(p + key), Value: []byte(value), CreateRevision: create, ModRevision: rev}}
	}
	del := func(rev int64, key string) *clientv3.Event {
		return &clientv3.Event{Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{Key: []byte(p + key), ModRevision: rev}}
	}
	cfg := func(rev int64, limit int64, closed bool) *clientv3.Event {
		return put(rev, 1, "config", fmt.Sprintf(`{"limit":%d,"max":4,"closed":%v}`, limit, closed))
	}
	// A limit of 2; a holds 1; b waits for 2; c waits for 1.
	base := []*clientv3.Event{
		cfg(1, 2, false),
		put(2, 2, "k/a", "wait 1"), cfg(3, 2, false), put(3, 2, "k/a", "held 1"),
		put(4, 4, "k/b", "wait 2"),
		put(5, 5, "k/c", "wait 1"),
	}
	tests := []struct {
		name  string
		tail  []*clientv3.Event
		wrong string // "" for a valid history
	}{
		{"a release serves the front waiter", []*clientv3.Event{
			del(6, "k/a"), cfg(7, 2, false), put(7, 4, "k/b", "held 2"),
		}, ""},
		{"a waiter overtakes the front one that fits the limit", []*clientv3.Event{
			cfg(6, 2, false), put(6, 5, "k/c", "held 1"),
		}, "the rules admit only"},
		{"a grant past the limit", []*clientv3.Event{
			cfg(6, 2, false), put(6, 4, "k/b", "held 2"),
		}, "the rules admit only"},
		{"an arrival takes a permit ahead of the queue", []*clientv3.Event{
			cfg(6, 2, false), put(6, 6, "k/d", "held 1"),
		}, "the rules admit only"},
		{"a grant after Close", []*clientv3.Event{
			del(6, "k/a"), cfg(7, 2, true), cfg(8, 2, true), put(8, 4, "k/b", "held 2"),
		}, "the rules admit only"},
		{"a lowered limit lets the follower pass the front waiter", []*clientv3.Event{
			cfg(6, 1, false), del(7, "k/a"), cfg(8, 1, false), put(8, 5, "k/c", "held 1"),
		}, ""},
		{"grants out of order", []*clientv3.Event{
			del(6, "k/a"), cfg(7, 4, false), put(8, 8, "k/d", "wait 1"),
			cfg(9, 4, false), put(9, 5, "k/c", "held 1"), put(9, 8, "k/d", "held 1"),
		}, "in that order"},
		{"a held key grows", []*clientv3.Event{put(6, 2, "k/a", "held 2")}, "rose from"},
		{"a key waits on a closed semaphore", []*clientv3.Event{cfg(6, 2, true), put(7, 7, "k/e", "wait 1")}, "closed"},
		{"a closed semaphore reopens", []*clientv3.Event{cfg(6, 2, true), cfg(7, 2, false)}, "reopened"},
		{"a name used again after its deletion", []*clientv3.Event{
			del(6, "k/c"), put(7, 7, "k/c", "wait 1"),
		}, ""},
		{"a floor key moves", []*clientv3.Event{put(6, 6, "f/h", ""), put(7, 6, "f/h", "")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := checkHistory(p, append(slices.Clone(base), tt.tail...))
			if tt.wrong == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wrong)
		})
	}
}
