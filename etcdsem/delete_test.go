package etcdsem_test

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/atomicsem/atomicsem/etcdsem"
	"github.com/atomicsem/atomicsem/internal/faultnet"
	"github.com/atomicsem/atomicsem/token"
)

// Requests that reach etcd after their client gave up on them. Each test
// below puts one handle behind a proxy of its own, holds a write of one of
// its keys, resets the connection so that the handle makes the write again
// on a new one (which succeeds, and gives the key's name back for reuse),
// lets the handle hold a new key under the same name, and only then
// delivers the held write to etcd. A write that removed the new key would
// give its permit to a second holder while the first still holds it.

// lateRig is a semaphore of limit 1 with a handle behind a proxy of its
// own and one that reaches etcd directly.
type lateRig struct {
	t      *testing.T
	ctx    context.Context
	prefix string
	px     *faultnet.Proxy
	h      *handle // behind px
	other  *handle // direct
}

func newLateRig(t *testing.T) *lateRig {
	srv := startServer(t)
	r := &lateRig{t: t, ctx: testCtx(t), prefix: prefixFor(t), px: newProxy(t, srv.clientURL.Host)}
	r.h = newHandle(t, srv, r.prefix, 1, 1, handleOpts{via: r.px})
	r.other = newHandle(t, srv, r.prefix, 0, 1, handleOpts{direct: true})
	return r
}

// holdWrite makes the proxy hold the handle's next request that names
// key, and reset its connection once it does, so that the request becomes
// late and the handle tries again on a new connection. It returns a
// function that waits for the hold and resets.
func (r *lateRig) holdWrite(key string) (resetOnceHeld func()) {
	r.px.HoldWhen(func(b []byte) bool { return bytes.Contains(b, []byte(key)) })
	holds := r.px.Stats().Holds
	return func() {
		r.t.Helper()
		require.NoError(r.t, r.px.Wait(r.ctx, func(st faultnet.Stats) bool { return st.Holds > holds }))
		r.px.Reset()
	}
}

// holdUnder acquires one permit on the handle, over and over, until it
// holds a key named key, and returns its token and fence.
func (r *lateRig) holdUnder(key string) (*token.Token, etcdsem.Fence) {
	r.t.Helper()
	for range 8 {
		tok, fence, err := r.h.AcquireFenced(r.ctx, 1)
		require.NoError(r.t, err)
		if fence.Key() == key {
			return &tok, fence
		}
		tok.Release()
	}
	r.t.Fatalf("the handle never used %q again", key)
	return nil, etcdsem.Fence{}
}

// deliverAndCheck delivers the late writes, then checks that the handle
// still holds the permit under fence: its key is as granted, nobody else
// is granted, and the fence holds.
func (r *lateRig) deliverAndCheck(fence etcdsem.Fence, late int) {
	r.t.Helper()
	n, err := r.px.DeliverLate(r.ctx)
	require.NoError(r.t, err)
	require.Equal(r.t, late, n, "late batches delivered")
	tok, ok, err := r.other.TryAcquire(r.ctx, 1)
	require.NoError(r.t, err)
	if ok {
		tok.Release()
	}
	require.False(r.t, ok, "a second holder was granted the only permit: the late write removed the live key")
	require.Equal(r.t, etcdsem.Stats{Available: 0, Held: 1, Limit: 1, Max: 1}, mustStats(r.t, r.other.Semaphore))
	held, err := guardedPut(r.ctx, r.other.cli, fence, "/resource/"+r.t.Name(), "still held")
	require.NoError(r.t, err)
	require.True(r.t, held, "the holder's fence no longer holds")
	select {
	case <-fence.Done():
		r.t.Fatal("the holder's Done closed while it holds")
	default:
	}
}

// The release of a token's last part, made late.
func TestLateReleaseLeavesTheNextKeyOfItsName(t *testing.T) {
	r := newLateRig(t)
	tok, fence, err := r.h.AcquireFenced(r.ctx, 1)
	require.NoError(t, err)
	key := fence.Key()
	reset := r.holdWrite(key)
	released := make(chan struct{})
	go func() {
		defer close(released)
		tok.Release()
	}()
	reset()
	<-released
	require.Empty(t, keys(t, r.other.cli, r.prefix), "the retried release deleted the key")

	tok2, fence2 := r.holdUnder(key)
	r.deliverAndCheck(fence2, 1)
	tok2.Release()
	require.Empty(t, keys(t, r.other.cli, r.prefix))
	require.NoError(t, r.h.Err())
}

// The deletion by which a cancelled waiter takes its key back, made late.
func TestLateTakeBackLeavesTheNextKeyOfItsName(t *testing.T) {
	r := newLateRig(t)
	held, err := r.other.Acquire(r.ctx, 1)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	p := goAcquire(wctx, r.h.Semaphore, 1)
	awaitWaiters(t, r.other.Semaphore, 1)
	var key string
	for k, v := range keys(t, r.other.cli, r.prefix) {
		if v == "wait 1" {
			key = k
		}
	}
	require.NotEmpty(t, key)

	reset := r.holdWrite(key)
	cancel()
	reset()
	p.wait(t)
	require.Equal(t, context.Canceled, p.err)
	require.NotContains(t, keys(t, r.other.cli, r.prefix), key, "the retried take-back deleted the key")
	held.Release()

	tok, fence := r.holdUnder(key)
	r.deliverAndCheck(fence, 1)
	tok.Release()
	require.NoError(t, r.h.Err())
}

// The clean-up of an Acquire whose first write failed on the client's
// side, made late, after the late first write itself.
func TestLateCleanUpLeavesTheNextKeyOfItsName(t *testing.T) {
	r := newLateRig(t)
	// The arrival is held, and its connection reset: the Acquire fails and
	// cleans up, and the clean-up is held and reset in turn.
	keyRE := regexp.MustCompile(regexp.QuoteMeta(r.prefix+"k/") + `[0-9a-f]+-[0-9a-f]+-[0-9a-f]+`)
	var key string
	r.px.HoldWhen(func(b []byte) bool {
		key = string(keyRE.Find(b))
		return key != ""
	})
	p := goAcquire(r.ctx, r.h.Semaphore, 1)
	require.NoError(t, r.px.Wait(r.ctx, func(st faultnet.Stats) bool { return st.Holds == 1 }))
	reset := r.holdWrite(key)
	r.px.Reset()
	reset()
	p.wait(t)
	require.ErrorIs(t, p.err, etcdsem.ErrUnavailable)
	require.Empty(t, keys(t, r.other.cli, r.prefix), "the retried clean-up left the key")

	tok, fence := r.holdUnder(key)
	r.deliverAndCheck(fence, 2)
	tok.Release()
	require.NoError(t, r.h.Err())
}

// A holder that loses its key while it believes it holds (here an
// operator deletes it) hears of it: its fence's Done closes, and its
// guarded write is refused. Its release afterwards gives up nothing else.
func TestHolderThatLosesItsKeyIsTold(t *testing.T) {
	srv := startServer(t)
	prefix := prefixFor(t)
	h := newHandle(t, srv, prefix, 2, 2, handleOpts{})
	ctx := testCtx(t)
	tok, fence, err := h.AcquireFenced(ctx, 1)
	require.NoError(t, err)
	other, otherFence, err := h.AcquireFenced(ctx, 1)
	require.NoError(t, err)

	_, err = h.cli.Delete(ctx, fence.Key())
	require.NoError(t, err)
	select {
	case <-fence.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the holder was not told that its key is gone")
	}
	ok, err := guardedPut(ctx, h.cli, fence, "/resource/"+t.Name(), "stale")
	require.NoError(t, err)
	require.False(t, ok, "a guarded write of a holder without a key went through")
	select {
	case <-otherFence.Done():
		t.Fatal("another token's Done closed")
	default:
	}
	tok.Release()
	require.NoError(t, h.Err())
	require.Equal(t, etcdsem.Stats{Available: 1, Held: 1, Limit: 2, Max: 2}, mustStats(t, h.Semaphore))
	other.Release()
	resp, err := h.cli.Get(ctx, prefix+"k/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Zero(t, resp.Count)
}

// A session whose lease etcd has ended (revoked here; expired, after a
// long pause) makes the calls that write under it fail with
// ErrSessionLost, whether or not the client has heard of it yet: etcd
// refuses a key under a lease it no longer has.
func TestCallsUnderAnEndedLeaseAreSessionLost(t *testing.T) {
	srv := startServer(t)
	prefix := prefixFor(t)
	h := newHandle(t, srv, prefix, 1, 1, handleOpts{ttl: 60}) // its client hears of the end only at its next renewal
	other := newHandle(t, srv, prefix, 0, 1, handleOpts{})
	ctx := testCtx(t)
	_, err := other.cli.Revoke(ctx, h.session.Lease())
	require.NoError(t, err)

	_, err = h.Acquire(ctx, 1)
	require.ErrorIs(t, err, etcdsem.ErrSessionLost)
	_, _, err = h.TryAcquire(ctx, 1)
	require.ErrorIs(t, err, etcdsem.ErrSessionLost)
	require.Equal(t, etcdsem.Stats{Available: 1, Limit: 1, Max: 1}, mustStats(t, other.Semaphore))
}
