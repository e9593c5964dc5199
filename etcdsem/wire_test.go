package etcdsem_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/atomicsem/atomicsem/etcdsem"
	"github.com/atomicsem/atomicsem/internal/faultnet"
	"github.com/atomicsem/atomicsem/token"
)

// The fault run: several handles, most behind a proxy of their own, make
// weighted requests (some cancelled after a random delay), release them
// (some in parts), and try, while the proxies delay, hold, reset, drop,
// black-hole and refuse what those handles send, deliver what reset
// connections held late (after the handles have moved on and used key
// names again), and the test ends sessions. The laws are checked from
// etcd's own history, recorded from the first revision:
//
//   - the history follows the in-process rules at every grant (checkHistory:
//     no grant past the limit, none out of arrival order);
//   - at no revision do the held keys hold more than the limit;
//   - every Fence's Revision is the revision at which etcd granted its key;
//   - no call fails with ErrSessionLost while its handle's session lives;
//   - no holder loses its key while it holds the token: before its release,
//     each holder writes, through a client of its own, a record guarded by
//     its Fence (IsHeld). A refused write is a loss, allowed only where the
//     test ended the holder's session and etcd deleted the key at that
//     session's revocation; the holder's Done and its handle's Done must
//     then close. A deletion that lands late and removes a live key is a
//     refused write with the session alive.

// faultRunOps returns the operations each worker of the fault run makes:
// ETCDSEM_FAULT_OPS if set, otherwise def.
func faultRunOps(t *testing.T, def int) int {
	if v := os.Getenv("ETCDSEM_FAULT_OPS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "ETCDSEM_FAULT_OPS")
		return n
	}
	return def
}

// faultRun is one run's fixture and record.
type faultRun struct {
	t         *testing.T
	ctx       context.Context
	srv       *server
	prefix    string // the semaphore's
	resPrefix string // the holders' guarded records
	obs       *clientv3.Client
	limit     int64
	timeout   time.Duration // each handle's WithTimeout
	slots     []*slot

	mu      sync.Mutex
	held    []*heldRecord
	revoked map[clientv3.LeaseID]int64 // the test's revocations: lease → revision
	// ErrSessionLost seen while the session lived on (a waiter's key
	// deleted under it, say).
	falseLosses []string

	ops     faultOps
	faults  map[string]int // injected, by kind; the injector's own
	revokes int
}

// faultOps counts what the workers did.
type faultOps struct {
	acquired, cancelled, unavailable, sessionLost atomic.Int64
	tried, triedOK, partial, lost                 atomic.Int64
	lateReleases                                  atomic.Int64
}

// A slot is a worker group's place on the semaphore: its proxy (nil for a
// handle that dials etcd directly) and its current handle, replaced when
// its session ends.
type slot struct {
	id int
	px *faultnet.Proxy

	mu sync.Mutex
	h  *handle
}

// heldRecord is what a worker knows of one fenced token it held.
type heldRecord struct {
	worker  string
	key     string
	rev     int64 // the Fence's Revision
	lease   clientv3.LeaseID
	exitRev int64 // the revision of its guarded record, 0 if refused
	// For a refused record: whether the Fence's Done and the handle's Done
	// closed within a bound.
	doneClosed, sessionEnded bool
}

func (r *faultRun) handleOpts(s *slot) handleOpts {
	return handleOpts{via: s.px, direct: s.px == nil, opts: []etcdsem.Option{etcdsem.WithTimeout(r.timeout)}}
}

// current returns the slot's handle.
func (s *slot) current() *handle {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h
}

// renew replaces old, a handle whose session has ended, with a new one,
// unless another worker of the slot has already; it returns the slot's
// handle.
func (r *faultRun) renew(s *slot, old *handle) (*handle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.h != old {
		return s.h, nil
	}
	var err error
	for range 20 { // the proxy may be refusing, or the network cut, for a while
		var h *handle
		if h, err = openHandle(r.t, r.srv, r.prefix, 0, r.limit, r.handleOpts(s)); err == nil {
			s.h = h
			return h, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, err
}

// worker makes ops requests through the slot's handle.
func (r *faultRun) worker(s *slot, w, ops int) {
	t := r.t
	name := fmt.Sprintf("%d-%d", s.id, w)
	rng := rand.New(rand.NewPCG(uint64(s.id), uint64(w)))
	for range ops {
		h := s.current()
		n := 1 + rng.Int64N(r.limit)
		var err error
		if rng.IntN(5) == 0 {
			err = r.try(h, n, rng)
		} else {
			err = r.acquire(s, h, name, n, rng)
		}
		switch {
		case err == nil:
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			r.ops.cancelled.Add(1)
		case errors.Is(err, etcdsem.ErrUnavailable):
			r.ops.unavailable.Add(1)
		case errors.Is(err, etcdsem.ErrSessionLost):
			r.ops.sessionLost.Add(1)
			if !closesWithin(h.Done(), 10*time.Second) {
				r.mu.Lock()
				r.falseLosses = append(r.falseLosses, fmt.Sprintf("worker %s: %v, but the session lives on", name, err))
				r.mu.Unlock()
			}
			if _, err := r.renew(s, h); err != nil {
				t.Errorf("worker %s: opening a new handle: %v", name, err)
				return
			}
		default:
			t.Errorf("worker %s: %v", name, err)
			return
		}
	}
}

// try makes a TryAcquire of n.
func (r *faultRun) try(h *handle, n int64, rng *rand.Rand) error {
	r.ops.tried.Add(1)
	tok, ok, err := h.TryAcquire(r.ctx, n)
	if err != nil || !ok {
		return err
	}
	r.ops.triedOK.Add(1)
	time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond)
	tok.Release()
	return nil
}

// acquire makes an AcquireFenced of n, cancelled after a random delay one
// time in three, and holds what it gets for a moment (see hold).
func (r *faultRun) acquire(s *slot, h *handle, name string, n int64, rng *rand.Rand) error {
	ctx, cancel := r.ctx, context.CancelFunc(func() {})
	if rng.IntN(3) == 0 {
		ctx, cancel = context.WithTimeout(r.ctx, time.Duration(5+rng.IntN(300))*time.Millisecond)
	}
	tok, fence, err := h.AcquireFenced(ctx, n)
	cancel()
	if err != nil {
		return err
	}
	r.ops.acquired.Add(1)
	r.hold(s, h, name, &tok, fence, n, rng)
	return nil
}

// hold holds tok for a moment, gives part of it back one time in three,
// writes the holder's guarded record, and releases it; behind a proxy, one
// release in four is held and reset (see releaseLate).
func (r *faultRun) hold(s *slot, h *handle, name string, tok *token.Token, fence etcdsem.Fence, n int64, rng *rand.Rand) {
	rec := &heldRecord{worker: name, key: fence.Key(), rev: fence.Revision(), lease: h.session.Lease()}
	time.Sleep(time.Duration(5+rng.IntN(45)) * time.Millisecond)
	if n > 1 && rng.IntN(3) == 0 {
		part, _ := tok.Split(1)
		part.Release()
		r.ops.partial.Add(1)
	}
	resp, err := r.obs.Txn(r.ctx).
		If(fence.IsHeld()).
		Then(clientv3.OpPut(r.resPrefix+name, fmt.Sprintf("%s %d", rec.key, rec.rev))).
		Commit()
	switch {
	case err != nil:
		r.t.Errorf("worker %s: the guarded record: %v", name, err)
	case resp.Succeeded:
		rec.exitRev = resp.Header.Revision
	default:
		r.ops.lost.Add(1)
		rec.doneClosed = closesWithin(fence.Done(), 10*time.Second)
		rec.sessionEnded = closesWithin(h.Done(), 10*time.Second)
	}
	if px := s.px; px != nil && rng.IntN(4) == 0 {
		r.releaseLate(px, tok, rec.key)
	} else {
		tok.Release()
	}
	r.mu.Lock()
	r.held = append(r.held, rec)
	r.mu.Unlock()
}

// releaseLate releases tok while px holds the release, then resets the
// handle's connections: the handle releases again on a new one, and the
// first attempt waits for a late delivery, which comes at a random time,
// perhaps once the handle holds a new key of the same name.
func (r *faultRun) releaseLate(px *faultnet.Proxy, tok *token.Token, key string) {
	r.ops.lateReleases.Add(1)
	before := px.Stats().Holds
	px.HoldWhen(func(b []byte) bool { return bytes.Contains(b, []byte(key)) })
	released := make(chan struct{})
	go func() {
		defer close(released)
		tok.Release()
	}()
	// The injector may disarm the hold first: then this is a reset.
	ctx, cancel := context.WithTimeout(r.ctx, time.Second)
	px.Wait(ctx, func(st faultnet.Stats) bool { return st.Holds > before })
	cancel()
	px.Reset()
	<-released
}

// closesWithin reports whether ch is closed within d.
func closesWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// sleep sleeps for a random duration in [lo, hi) milliseconds.
func sleep(rng *rand.Rand, lo, hi int) {
	time.Sleep(time.Duration(lo+rng.IntN(hi-lo)) * time.Millisecond)
}

// inject puts a random fault on a random proxy every 10 to 100 ms until
// stop is closed. Each fault ends before the next begins, and none lasts
// longer than a fraction of a second, far within the sessions' lease.
func (r *faultRun) inject(stop <-chan struct{}, maxRevokes int) {
	rng := rand.New(rand.NewPCG(1, 2))
	var proxied []*slot
	for _, s := range r.slots {
		if s.px != nil {
			proxied = append(proxied, s)
		}
	}
	keyDir := []byte(r.prefix + "k/")
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(10+rng.IntN(90)) * time.Millisecond):
		}
		s := proxied[rng.IntN(len(proxied))]
		px := s.px
		var kind string
		switch k := rng.IntN(100); {
		case k < 25:
			kind = "hold a write of a key, reset"
			px.HoldWhen(func(b []byte) bool { return bytes.Contains(b, keyDir) })
			sleep(rng, 0, 150)
			px.Reset()
			px.Release() // disarm, if nothing matched
		case k < 30:
			kind = "hold, reset"
			px.HoldNext()
			sleep(rng, 0, 150)
			px.Reset()
			px.Release()
		case k < 37:
			kind = "hold, release"
			px.HoldNext()
			sleep(rng, 0, 150)
			px.Release()
		case k < 50:
			dir := faultnet.Dir(rng.IntN(2))
			kind = "delay " + dir.String()
			px.Delay(dir, time.Duration(20+rng.IntN(400))*time.Millisecond)
			sleep(rng, 50, 500)
			px.Delay(dir, 0)
		case k < 57:
			kind = "drop the answers, reset"
			px.Drop(faultnet.Down, true)
			sleep(rng, 20, 300)
			px.Reset()
			px.Drop(faultnet.Down, false)
		case k < 62:
			kind = "black hole, reset"
			px.BlackHole(true)
			sleep(rng, 50, 500)
			px.BlackHole(false)
			px.Reset()
		case k < 67:
			kind = "refuse, reset"
			if err := px.Refuse(true); err != nil {
				r.t.Errorf("refusing: %v", err)
				return
			}
			px.Reset()
			sleep(rng, 50, 400)
			if err := px.Refuse(false); err != nil {
				r.t.Errorf("accepting again: %v", err)
				return
			}
		case k < 97:
			kind = "deliver late"
			ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
			if _, err := px.DeliverLate(ctx); err != nil {
				kind = "deliver late: failed"
			}
			cancel()
		default:
			if r.revokes >= maxRevokes {
				continue
			}
			kind = "end a session"
			s := r.slots[rng.IntN(len(r.slots))]
			lease := s.current().session.Lease()
			resp, err := r.obs.Revoke(r.ctx, lease)
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				continue // ended already, and not yet replaced
			}
			if err != nil {
				r.t.Errorf("revoking %x: %v", lease, err)
				return
			}
			r.mu.Lock()
			r.revoked[lease] = resp.Header.Revision
			r.mu.Unlock()
			r.revokes++
		}
		r.faults[kind]++
	}
}

// heal ends every fault and delivers what the proxies hold late.
func (r *faultRun) heal() {
	for _, s := range r.slots {
		if px := s.px; px != nil {
			px.Release()
			px.Delay(faultnet.Up, 0)
			px.Delay(faultnet.Down, 0)
			px.Drop(faultnet.Up, false)
			px.Drop(faultnet.Down, false)
			px.BlackHole(false)
			require.NoError(r.t, px.Refuse(false))
		}
	}
}

func (r *faultRun) deliverLate() {
	for _, s := range r.slots {
		if s.px != nil {
			ctx, cancel := context.WithTimeout(r.ctx, 20*time.Second)
			_, err := s.px.DeliverLate(ctx)
			cancel()
			if err != nil {
				r.faults["deliver late: failed"]++
			}
		}
	}
}

// TestFaultyNetworkKeepsTheLaws is the fault run (see the top of the
// file): four handles, three behind proxies, two workers each, on a limit
// of 3 with requests of 1 to 3. Each worker makes 25 requests by default
// (ETCDSEM_FAULT_OPS sets the number).
func TestFaultyNetworkKeepsTheLaws(t *testing.T) {
	const (
		handles = 4
		proxied = 3
		workers = 2
		limit   = 3
	)
	ops := faultRunOps(t, 25)
	srv := startServer(t)
	root := prefixFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	r := &faultRun{
		t: t, ctx: ctx, srv: srv, prefix: root + "sem/", resPrefix: root + "res/",
		obs: newClient(t, srv, nil), limit: limit, timeout: time.Second,
		revoked: make(map[clientv3.LeaseID]int64), faults: make(map[string]int),
	}
	rec := record(t, srv, root)
	for i := range handles {
		s := &slot{id: i}
		if i < proxied {
			s.px = newProxy(t, srv.clientURL.Host)
		}
		s.h = newHandle(t, srv, r.prefix, limit, limit, r.handleOpts(s))
		r.slots = append(r.slots, s)
	}

	start := time.Now()
	stop := make(chan struct{})
	injected := make(chan struct{})
	go func() {
		defer close(injected)
		r.inject(stop, max(1, handles*workers*ops/100))
	}()
	var wg sync.WaitGroup
	for _, s := range r.slots {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.worker(s, w, ops)
			}()
		}
	}
	wg.Wait()
	close(stop)
	<-injected
	r.heal()
	r.deliverLate()
	// Releases that failed go on in the background until they succeed.
	require.Eventually(t, func() bool { return len(keys(t, r.obs, r.prefix)) == 0 }, 30*time.Second, 10*time.Millisecond,
		"keys left: %v", keys(t, r.obs, r.prefix))
	r.deliverLate()
	elapsed := time.Since(start)
	events := rec.stop(t)

	var px faultnet.Stats
	for _, s := range r.slots {
		if s.px != nil {
			st := s.px.Stats()
			px.Holds += st.Holds
			px.Resets += st.Resets
			px.Delayed += st.Delayed
			px.Dropped += st.Dropped
			px.Delivered += st.Delivered
			px.Lost += st.Lost
			px.Accepted += st.Accepted
		}
	}
	violations := r.check(events)
	hs, _ := checkHistory(r.prefix, eventsUnder(events, r.prefix))
	t.Logf("%d workers x %d requests in %v: %d acquired (%d given back in part, %d released through a hold and a reset), %d cancelled, %d unavailable, %d sessions lost to workers, %d tried (%d granted); %d holders lost their key",
		handles*workers, ops, elapsed.Round(time.Millisecond), r.ops.acquired.Load(), r.ops.partial.Load(), r.ops.lateReleases.Load(), r.ops.cancelled.Load(),
		r.ops.unavailable.Load(), r.ops.sessionLost.Load(), r.ops.tried.Load(), r.ops.triedOK.Load(), r.ops.lost.Load())
	t.Logf("faults: %s", formatCounts(r.faults))
	t.Logf("proxies: %d connections, %d holds, %d resets, %d chunks delayed, %d bytes dropped, %d late batches delivered, %d lost",
		px.Accepted, px.Holds, px.Resets, px.Delayed, px.Dropped, px.Delivered, px.Lost)
	t.Logf("history: %d revisions, %d grants in %d transactions; violations: %d", hs.revisions, hs.grants, hs.batches, len(violations))
	for _, v := range violations {
		t.Error(v)
	}
	require.Positive(t, r.ops.acquired.Load())
	require.Positive(t, px.Delivered, "no late batch was delivered")
}

// eventsUnder returns the events of keys under prefix.
func eventsUnder(events []*clientv3.Event, prefix string) []*clientv3.Event {
	var out []*clientv3.Event
	for _, ev := range events {
		if strings.HasPrefix(string(ev.Kv.Key), prefix) {
			out = append(out, ev)
		}
	}
	return out
}

// formatCounts prints counts by kind, in order of kind.
func formatCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// check returns the laws the run broke, from etcd's history (events) and
// the holders' records.
func (r *faultRun) check(events []*clientv3.Event) []string {
	out := slices.Clone(r.falseLosses)
	sem := eventsUnder(events, r.prefix)
	if _, err := checkHistory(r.prefix, sem); err != nil {
		out = append(out, fmt.Sprintf("the history breaks the rules: %v", err))
		// The changes that led there, to tell why.
		var bad int64
		fmt.Sscanf(err.Error(), "revision %d:", &bad)
		for _, ev := range events {
			if ev.Kv.ModRevision > bad-40 && ev.Kv.ModRevision <= bad {
				r.t.Logf("history: %d %s %s (created %d) %q", ev.Kv.ModRevision, ev.Type, strings.TrimPrefix(string(ev.Kv.Key), r.prefix), ev.Kv.CreateRevision, ev.Kv.Value)
			}
		}
	}

	// Replay the acquirers' keys: the weight held at every revision, and
	// each grant's revision and the deletion of the key it granted.
	type incarnation struct{ granted, deleted int64 }
	live := make(map[string]*incarnation)    // by key: the key as it is
	granted := make(map[string]*incarnation) // by key and grant revision
	held := make(map[string]int64)
	keyDir := r.prefix + "k/"
	for i := 0; i < len(sem); {
		rev := sem[i].Kv.ModRevision
		for ; i < len(sem) && sem[i].Kv.ModRevision == rev; i++ {
			ev := sem[i]
			key := string(ev.Kv.Key)
			if !strings.HasPrefix(key, keyDir) {
				continue
			}
			if ev.Type == clientv3.EventTypeDelete {
				if inc := live[key]; inc != nil {
					inc.deleted = rev
				}
				delete(live, key)
				delete(held, key)
				continue
			}
			k, err := parseModelKey(ev.Kv)
			if err != nil {
				out = append(out, err.Error())
				continue
			}
			inc := live[key]
			if inc == nil || ev.Kv.CreateRevision == rev {
				inc = &incarnation{}
				live[key] = inc
			}
			if k.held && inc.granted == 0 {
				inc.granted = rev
				granted[fmt.Sprintf("%s@%d", key, rev)] = inc
			}
			if k.held {
				held[key] = k.n
			}
		}
		var sum int64
		for _, n := range held {
			sum += n
		}
		if sum > r.limit {
			out = append(out, fmt.Sprintf("revision %d: %d permits held, limit %d", rev, sum, r.limit))
		}
	}

	for _, h := range r.held {
		inc := granted[fmt.Sprintf("%s@%d", h.key, h.rev)]
		switch {
		case inc == nil:
			out = append(out, fmt.Sprintf("worker %s: Fence.Revision %d of %s is no grant of that key in the history", h.worker, h.rev, h.key))
		case h.exitRev != 0:
		default:
			revokedAt, ok := r.revoked[h.lease]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("worker %s: %s (granted at %d) was deleted at %d while its holder held it and its session lived", h.worker, h.key, h.rev, inc.deleted))
			case inc.deleted != revokedAt:
				out = append(out, fmt.Sprintf("worker %s: %s (granted at %d) was deleted at %d, not at its session's end (%d)", h.worker, h.key, h.rev, inc.deleted, revokedAt))
			case !h.doneClosed || !h.sessionEnded:
				out = append(out, fmt.Sprintf("worker %s: lost %s with its session, but Done closed: fence %v, handle %v", h.worker, h.key, h.doneClosed, h.sessionEnded))
			}
		}
	}
	return out
}
