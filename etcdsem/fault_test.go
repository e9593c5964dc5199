package etcdsem_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/etcdsem"
	"github.com/atomicsem/atomicsem/token"
)

// pendingAcquire is an Acquire running in its own goroutine.
type pendingAcquire struct {
	done chan struct{}
	tok  token.Token
	err  error
	at   time.Time // when it returned
}

func goAcquire(ctx context.Context, s *etcdsem.Semaphore, n int64) *pendingAcquire {
	p := &pendingAcquire{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.tok, p.err = s.Acquire(ctx, n)
		p.at = time.Now()
	}()
	return p
}

// wait waits for the Acquire to return, failing the test after a generous
// limit.
func (p *pendingAcquire) wait(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatal("Acquire did not return")
	}
}

// awaitWaiters waits until n acquirers wait on the semaphore, as Stats
// counts them.
func awaitWaiters(t *testing.T, s *etcdsem.Semaphore, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return mustStats(t, s).Waiters == n },
		10*time.Second, time.Millisecond, "%d waiters", n)
}

// keys returns the semaphore's acquirer keys and their values.
func keys(t *testing.T, cli *clientv3.Client, prefix string) map[string]string {
	t.Helper()
	resp, err := cli.Get(testCtx(t), prefix+"k/", clientv3.WithPrefix())
	require.NoError(t, err)
	out := make(map[string]string)
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

// A holder whose client goes away without releasing (its process died,
// say) gives its permits back when its lease expires: within the lease's
// TTL, plus the second etcd may take to notice, the next waiter is
// granted. A holder whose session is closed gives them back at once.
func TestCrashedHolderReturnsPermitsWithinTheLease(t *testing.T) {
	const ttl = 1 // seconds, the shortest lease etcd grants
	tests := []struct {
		name   string
		crash  func(h *handle)
		within time.Duration
	}{
		{"client closed", func(h *handle) { h.cli.Close() }, ttl*time.Second + time.Second},
		{"session closed", func(h *handle) { h.session.Close() }, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t)
			prefix := prefixFor(t)
			holder := newHandle(t, srv, prefix, 2, 2, handleOpts{ttl: ttl})
			waiter := newHandle(t, srv, prefix, 0, 2, handleOpts{})
			_, err := holder.Acquire(testCtx(t), 2) // never released
			require.NoError(t, err)
			p := goAcquire(testCtx(t), waiter.Semaphore, 1)
			awaitWaiters(t, waiter.Semaphore, 1)

			crashed := time.Now()
			tt.crash(holder)
			p.wait(t)
			require.NoError(t, p.err)
			took := p.at.Sub(crashed)
			require.LessOrEqual(t, took, tt.within)
			t.Logf("the waiter was granted %v after the crash", took.Round(time.Millisecond))
			require.Equal(t, etcdsem.Stats{Available: 1, Held: 1, Limit: 2, Max: 2}, mustStats(t, waiter.Semaphore))
			p.tok.Release()
		})
	}
}

// The recovery bound: a holder crashes, and the etcd server restarts
// before the holder's lease has run out. etcd renews every lease when a
// member becomes leader, so the lease now runs out a full TTL after the
// restart, not after the crash; and the waiter hears of it once its client
// has reconnected. With a client that retries its connection within half
// a second, the waiter, which keeps its place through the outage, is
// granted within the restart's time plus the TTL plus a second or two.
func TestRecoveryAfterACrashAndARestartIsBoundedByTheLastRestart(t *testing.T) {
	const ttl = 3
	srv := startServerBehindProxy(t) // its clients' connections are cut at once, so it stops at once
	prefix := prefixFor(t)
	holder := newHandle(t, srv, prefix, 1, 1, handleOpts{ttl: ttl})
	waiter := newHandle(t, srv, prefix, 0, 1, handleOpts{dial: []grpc.DialOption{fastReconnect}})
	_, err := holder.Acquire(testCtx(t), 1) // never released
	require.NoError(t, err)
	p := goAcquire(testCtx(t), waiter.Semaphore, 1)
	awaitWaiters(t, waiter.Semaphore, 1)

	crashed := time.Now()
	holder.cli.Close()
	time.Sleep(500 * time.Millisecond)
	srv.cut()
	srv.stop()
	stopped := time.Since(crashed)
	if stopped >= ttl*time.Second {
		t.Skipf("the server took %v to stop: the lease ran out first", stopped)
	}
	srv.start()
	srv.heal()
	restarted := time.Since(crashed)
	p.wait(t)
	require.NoError(t, p.err)
	took := p.at.Sub(crashed)
	t.Logf("stopped %v and restarted %v after the crash; the waiter was granted %v after the crash (TTL %ds)",
		stopped.Round(time.Millisecond), restarted.Round(time.Millisecond), took.Round(time.Millisecond), ttl)
	require.Greater(t, took, restarted+ttl*time.Second/2, "the lease ran out before the restart")
	require.LessOrEqual(t, took, restarted+ttl*time.Second+2*time.Second) // the expiry check, the reconnect, a loaded machine
	p.tok.Release()
}

// A waiter whose context is cancelled while its key waits ahead of others
// deletes the key, and the followers that it held back are served.
func TestCancelledWaiterLeavesNoKeyAndFollowersAreServed(t *testing.T) {
	srv := startServer(t)
	prefix := prefixFor(t)
	a := newHandle(t, srv, prefix, 2, 2, handleOpts{})
	b := newHandle(t, srv, prefix, 0, 2, handleOpts{})
	c := newHandle(t, srv, prefix, 0, 2, handleOpts{})
	held, err := a.Acquire(testCtx(t), 1)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(testCtx(t))
	head := goAcquire(ctx, b.Semaphore, 2) // fits the limit, not the free permit
	awaitWaiters(t, a.Semaphore, 1)
	follower := goAcquire(testCtx(t), c.Semaphore, 1)
	awaitWaiters(t, a.Semaphore, 2)

	var headKey string
	for k, v := range keys(t, a.cli, prefix) {
		if v == "wait 2" {
			headKey = k
		}
	}
	require.NotEmpty(t, headKey)
	select {
	case <-follower.done:
		t.Fatal("the follower overtook the head waiter")
	default:
	}

	cancel()
	head.wait(t)
	require.Equal(t, context.Canceled, head.err)
	require.NotContains(t, keys(t, a.cli, prefix), headKey, "the cancelled waiter's key is gone")
	follower.wait(t)
	require.NoError(t, follower.err)
	require.Equal(t, etcdsem.Stats{Available: 0, Held: 2, Limit: 2, Max: 2}, mustStats(t, a.Semaphore))
	held.Release()
	follower.tok.Release()
	require.Empty(t, keys(t, a.cli, prefix))
}

// Close on one handle fails the waiters parked on every other handle, and
// leaves no waiting key behind.
func TestCloseWakesWaitersAcrossClients(t *testing.T) {
	srv := startServer(t)
	prefix := prefixFor(t)
	closer := newHandle(t, srv, prefix, 1, 4, handleOpts{})
	held, err := closer.Acquire(testCtx(t), 1)
	require.NoError(t, err)
	var parked []*pendingAcquire
	for i := range 3 {
		h := newHandle(t, srv, prefix, 0, 4, handleOpts{})
		for n := range int64(2) {
			parked = append(parked, goAcquire(testCtx(t), h.Semaphore, 1+n*3)) // 1, and 4: above the limit
			awaitWaiters(t, closer.Semaphore, 2*i+int(n)+1)
		}
	}

	require.NoError(t, closer.Close(testCtx(t)))
	for _, p := range parked {
		p.wait(t)
		require.ErrorIs(t, p.err, etcdsem.ErrClosed)
		require.ErrorIs(t, p.err, atomicsem.ErrClosed)
	}
	require.Equal(t, etcdsem.Stats{Available: 0, Held: 1, Limit: 1, Max: 4, Closed: true}, mustStats(t, closer.Semaphore))
	require.Len(t, keys(t, closer.cli, prefix), 1, "only the holder's key is left")
	held.Release()
	require.NoError(t, closer.WaitIdle(testCtx(t)))
}

// A Release that cannot reach etcd returns within the handle's timeout
// and gives up that token only: the session lives on, the handle goes on
// deleting the key in the background, and the permit comes back as soon
// as etcd can be reached, long before the lease would run out.
func TestFailedReleaseGivesUpOneTokenNotTheSession(t *testing.T) {
	srv := startServerBehindProxy(t)
	prefix := prefixFor(t)
	h := newHandle(t, srv, prefix, 1, 1, handleOpts{ttl: 30, opts: []etcdsem.Option{etcdsem.WithTimeout(300 * time.Millisecond)}})
	other := newHandle(t, srv, prefix, 0, 1, handleOpts{direct: true})
	tok, err := h.Acquire(testCtx(t), 1)
	require.NoError(t, err)

	srv.cut()
	start := time.Now()
	tok.Release()
	require.Less(t, time.Since(start), 2*time.Second, "Release must be bounded")
	require.Equal(t, int64(1), mustStats(t, other.Semaphore).Held, "the key is not deleted yet")
	srv.heal()

	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second) // well within the lease
	defer cancel()
	tok2, err := other.Acquire(ctx, 1)
	require.NoError(t, err, "the permit waited for the lease")
	took := time.Since(start)
	require.Less(t, took, 10*time.Second, "the permit waited for the lease")
	t.Logf("the permit came back %v after the network broke", took.Round(time.Millisecond))
	require.NoError(t, h.Err(), "the session was given up")
	tok2.Release()
	tok, err = h.Acquire(testCtx(t), 1)
	require.NoError(t, err, "the handle is usable")
	tok.Release()
}

// The server stops and restarts on the same data directory while four
// clients run acquire-release cycles. No permit is lost or doubled: the
// test's own count never passes the limit, the recorded history follows
// the rules across the restart, every cycle completes (clients retry what
// failed with ErrUnavailable, and open a new handle if a release they
// could not make gave up their session), and the semaphore ends as it
// began.
func TestServerRestartLosesNoPermits(t *testing.T) {
	const clients = 4
	cycles := loadCycles(t, 60)
	srv := startServerBehindProxy(t)
	r := newLoadRun(t, srv, 3)
	rec := record(t, srv, r.prefix)
	ctl := newHandle(t, srv, r.prefix, 3, 8, handleOpts{})
	ho := handleOpts{opts: []etcdsem.Option{etcdsem.WithTimeout(10 * time.Second)}}
	var wg sync.WaitGroup
	for i := range clients {
		h := newHandle(t, srv, r.prefix, 0, 8, ho)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.client(i, cycles, h, ho)
		}()
	}

	var before int64
	require.Eventually(t, func() bool { return r.cycles.Load() >= int64(clients*cycles/4) }, 30*time.Second, time.Millisecond)
	// Cut the clients off first, as a crash would, so that the server
	// does not wait for their streams to end before it stops.
	srv.cut()
	srv.stop()
	before = r.cycles.Load()
	time.Sleep(500 * time.Millisecond)
	srv.start()
	srv.heal()
	restarted := time.Now()
	wg.Wait()
	t.Logf("%d cycles before the restart, %d after (%v); %d handles opened again",
		before, r.cycles.Load()-before, time.Since(restarted).Round(time.Millisecond), r.resumed.Load())

	require.Equal(t, int64(clients*cycles), r.cycles.Load())
	require.Greater(t, r.cycles.Load(), before, "clients resume after the restart")
	st := mustStats(t, ctl.Semaphore)
	require.Equal(t, etcdsem.Stats{Available: 3, Held: 0, Limit: 3, Max: 8}, st)
	hs, err := checkHistory(r.prefix, rec.stop(t))
	require.NoError(t, err)
	require.GreaterOrEqual(t, hs.grants, clients*cycles)
}

// errorIsPrefixed reports whether err's message is in the package's voice.
func errorIsPrefixed(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "etcdsem: ")
}

// A server that cannot be reached: each call returns ErrUnavailable within
// the handle's timeout, or ctx.Err() if the caller's context ends first.
// An Acquire whose key may have been written goes on taking it back in
// the background, without giving up the session, and does so once the
// server can be reached again.
func TestUnreachableServerFailsCallsWithinTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv := startServerBehindProxy(t)
	prefix := prefixFor(t)
	h := newHandle(t, srv, prefix, 1, 2, handleOpts{opts: []etcdsem.Option{etcdsem.WithTimeout(timeout)}})
	srv.cut()

	bounded := func(name string, call func() error) {
		t.Helper()
		start := time.Now()
		err := call()
		require.ErrorIs(t, err, etcdsem.ErrUnavailable, name)
		require.True(t, errorIsPrefixed(err), "%s: %v", name, err)
		require.Less(t, time.Since(start), timeout+time.Second, name)
	}
	ctx := testCtx(t)
	bounded("Stats", func() error { _, err := h.Stats(ctx); return err })
	bounded("TryRelease", func() error { _, err := h.TryRelease(ctx, 1); return err })
	bounded("SetLimit", func() error { return h.SetLimit(ctx, 2) })
	bounded("WaitIdle", func() error { return h.WaitIdle(ctx) })
	bounded("New", func() error {
		_, err := etcdsem.New(ctx, h.session, prefix, 0, 2, etcdsem.WithTimeout(timeout))
		return err
	})
	short, cancel := context.WithTimeout(ctx, timeout/10)
	defer cancel()
	_, err := h.Stats(short)
	require.Equal(t, context.DeadlineExceeded, err, "a context that ends first wins, unwrapped")

	bounded("Acquire", func() error { _, err := h.Acquire(ctx, 1); return err })
	require.NoError(t, h.Err(), "the session was given up")
	srv.heal()
	var st etcdsem.Stats
	require.Eventually(t, func() bool { // the client reconnects after a backoff
		st, err = h.Stats(ctx)
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)
	st.Revision = 0
	require.Equal(t, etcdsem.Stats{Available: 1, Limit: 1, Max: 2}, st, "the failed Acquire left its key")
	require.NoError(t, h.Err())
}

// A waiter that finds itself admitted behind a batch head that never
// grants (its process is gone, its lease not yet expired) grants the batch
// itself: it is not held back for the rest of the dead waiter's lease. The dead waiter's key is granted with the batch,
// and its permits come back when its lease ends.
func TestDeadHeadOfBatchDoesNotHoldBackTheWaitersBehind(t *testing.T) {
	srv := startServer(t)
	prefix := prefixFor(t)
	h := newHandle(t, srv, prefix, 2, 2, handleOpts{})
	held, err := h.Acquire(testCtx(t), 2)
	require.NoError(t, err)

	// A waiting key whose owner is gone but whose lease lives on.
	ghostCli := newClient(t, srv, nil)
	ghost := newSession(t, ghostCli, 10)
	_, err = ghostCli.Put(testCtx(t), prefix+"k/ghost", "wait 1", clientv3.WithLease(ghost.Lease()))
	require.NoError(t, err)
	held.Release() // admits the ghost, which never grants

	other := newHandle(t, srv, prefix, 0, 2, handleOpts{})
	start := time.Now()
	tok, err := other.Acquire(testCtx(t), 1)
	require.NoError(t, err)
	took := time.Since(start)
	require.Less(t, took, time.Second)
	t.Logf("granted %v after arriving", took.Round(time.Millisecond))
	require.Regexp(t, "^held 1( |$)", keys(t, h.cli, prefix)[prefix+"k/ghost"], "granted, with or without the grant's note")

	closeSession(ghostCli, ghost) // the ghost's lease ends
	tok.Release()
	require.Equal(t, etcdsem.Stats{Available: 2, Held: 0, Limit: 2, Max: 2}, mustStats(t, h.Semaphore))
}

// A waiter first in line whose process died is the only one that watches
// for releases, so it holds back those behind it; but only until its lease
// runs out and etcd deletes its key, which wakes the next in line.
func TestDeadWaiterAtTheHeadStallsTheQueueOnlyForItsLease(t *testing.T) {
	const ttl = 1
	srv := startServer(t)
	prefix := prefixFor(t)
	h := newHandle(t, srv, prefix, 1, 1, handleOpts{})
	held, err := h.Acquire(testCtx(t), 1)
	require.NoError(t, err)

	ghostCli := newClient(t, srv, nil)
	ghost := newSession(t, ghostCli, ttl)
	_, err = ghostCli.Put(testCtx(t), prefix+"k/ghost", "wait 1", clientv3.WithLease(ghost.Lease()))
	require.NoError(t, err)
	other := newHandle(t, srv, prefix, 0, 1, handleOpts{})
	p := goAcquire(testCtx(t), other.Semaphore, 1)
	awaitWaiters(t, h.Semaphore, 2)

	ghost.Orphan() // the ghost's process dies: its lease is no longer renewed
	died := time.Now()
	held.Release()
	p.wait(t)
	require.NoError(t, p.err)
	took := p.at.Sub(died)
	require.Less(t, took, ttl*time.Second+time.Second, "stalled for longer than the dead waiter's lease")
	t.Logf("granted %v after the dead waiter's process died (lease %ds)", took.Round(time.Millisecond), ttl)
	p.tok.Release()
}

// An Acquire whose first write failed on the client's side does not know
// whether etcd will apply it, and etcd may apply it after the deletion
// meant to undo it. So the give-up moves the handle's floor key, and a
// write sent before it that lands after it is refused: it must not leave a
// waiter that nobody waits for, which the rules would grant and so hold
// permits until the session ends. The give-up leaves no key of its own.
func TestWriteThatLandsAfterItsCleanUpIsRefused(t *testing.T) {
	srv := startServer(t)
	prefix := prefixFor(t)
	h := newHandle(t, srv, prefix, 1, 1, handleOpts{})
	ctx := testCtx(t)
	key := etcdsem.NewKey(h.Semaphore)

	sentAt := etcdsem.Floor(h.Semaphore)   // the write is sent
	etcdsem.CleanUp(ctx, h.Semaphore, key) // the give-up, before the write lands
	written, err := etcdsem.Arrive(ctx, h.Semaphore, key, 1, sentAt)
	require.NoError(t, err)
	require.False(t, written, "the late write was applied")
	require.Equal(t, etcdsem.Stats{Available: 1, Limit: 1, Max: 1}, mustStats(t, h.Semaphore),
		"the late write left a waiter")
	tok, ok, err := h.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok, "the late write holds back arrivals")
	tok.Release()

	// Where the key was written, the give-up deletes it; writes sent after
	// a give-up go through.
	key = etcdsem.NewKey(h.Semaphore)
	written, err = etcdsem.Arrive(ctx, h.Semaphore, key, 1, etcdsem.Floor(h.Semaphore))
	require.NoError(t, err)
	require.True(t, written)
	require.Equal(t, 1, mustStats(t, h.Semaphore).Waiters)
	etcdsem.CleanUp(ctx, h.Semaphore, key)
	require.Empty(t, keys(t, h.cli, prefix))
	resp, err := h.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Equal(t, int64(2), resp.Count, "the config and the handle's floor key")
	require.Equal(t, etcdsem.Stats{Available: 1, Limit: 1, Max: 1}, mustStats(t, h.Semaphore))
}

// TryAcquire reads the semaphore, then grants itself from what it read. A
// waiter that arrives between the two is ahead of it in line, and the
// read did not see it: TryAcquire must not take the permit that waiter is
// next for.
func TestTryAcquireDoesNotOvertakeAWaiterThatArrivesAfterItsRead(t *testing.T) {
	srv := startServer(t)
	prefix := prefixFor(t)
	h := newHandle(t, srv, prefix, 2, 2, handleOpts{})
	other := newHandle(t, srv, prefix, 0, 2, handleOpts{})
	ctx := testCtx(t)
	held, err := h.Acquire(ctx, 1)
	require.NoError(t, err)

	var waiter *pendingAcquire
	ok, err := etcdsem.TryAcquireAfter(ctx, h.Semaphore, 1, func() {
		// One permit is free; this waiter fits the limit, not the free
		// permit, so it holds back everyone who arrives after it.
		waiter = goAcquire(ctx, other.Semaphore, 2)
		awaitWaiters(t, h.Semaphore, 1)
	})
	require.NoError(t, err)
	require.False(t, ok, "TryAcquire overtook a waiter that arrived before it was granted")

	held.Release()
	waiter.wait(t)
	require.NoError(t, waiter.err)
	waiter.tok.Release()
}

// The etcd client hands a server's refusal to serve (its own request
// timeout, no leader) to the caller as an rpctypes.EtcdError, which keeps
// the gRPC code but not the status: those are ErrUnavailable, like a
// round trip that does not come back in time, and not an error of the
// semaphore's own.
func TestServerRefusalsToServeAreUnavailable(t *testing.T) {
	for _, err := range []error{
		rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost,
		rpctypes.ErrNoLeader, rpctypes.ErrLeaderChanged,
		rpctypes.ErrGRPCTimeout, status.Error(codes.DeadlineExceeded, "deadline"),
		fmt.Errorf("wrapped: %w", rpctypes.ErrTimeout),
	} {
		code := etcdsem.GRPCCode(err)
		require.True(t, code == codes.Unavailable || code == codes.DeadlineExceeded, "%v: %v", err, code)
	}
	for _, err := range []error{rpctypes.ErrCompacted, rpctypes.ErrPermissionDenied, errors.New("other")} {
		code := etcdsem.GRPCCode(err)
		require.False(t, code == codes.Unavailable || code == codes.DeadlineExceeded, "%v: %v", err, code)
	}
}
