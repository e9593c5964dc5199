package etcdsem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/atomicsem/atomicsem/etcdsem"
)

// guardedPut writes value to key through cli only if fence still holds,
// and reports whether it did.
func guardedPut(ctx context.Context, cli *clientv3.Client, fence etcdsem.Fence, key, value string) (bool, error) {
	resp, err := cli.Txn(ctx).If(fence.IsHeld()).Then(clientv3.OpPut(key, value)).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// A holder cut off from etcd loses its permit when its lease runs out, and
// its successor is granted, while the holder cannot yet know. Once it can
// reach etcd again, its guarded write is refused and the successor's goes
// through; the successor's fencing revision is the larger; and the stale
// holder's Done is closed once its handle learns that its session ended.
func TestStaleHoldersGuardedWriteIsRefused(t *testing.T) {
	srv := startServerBehindProxy(t)
	prefix := prefixFor(t)
	resource := "/resource/" + t.Name()
	stale := newHandle(t, srv, prefix, 1, 1, handleOpts{ttl: 1})
	next := newHandle(t, srv, prefix, 0, 1, handleOpts{direct: true})
	ctx := testCtx(t)

	tok1, fence1, err := stale.AcquireFenced(ctx, 1)
	require.NoError(t, err)
	ok, err := guardedPut(ctx, stale.cli, fence1, resource, "stale")
	require.NoError(t, err)
	require.True(t, ok, "the holder's guarded write")

	waiting := make(chan struct{})
	var fence2 etcdsem.Fence
	go func() {
		defer close(waiting)
		tok2, f, err := next.AcquireFenced(ctx, 1)
		if err == nil {
			fence2 = f
			t.Cleanup(tok2.Release)
		}
	}()
	awaitWaiters(t, next.Semaphore, 1)
	srv.cut()
	<-waiting
	require.NotZero(t, fence2.Revision(), "the successor was not granted")
	require.Greater(t, fence2.Revision(), fence1.Revision(), "fencing revisions must grow")
	ok, err = guardedPut(ctx, next.cli, fence2, resource, "next")
	require.NoError(t, err)
	require.True(t, ok, "the successor's guarded write")

	srv.heal()
	var refused bool
	require.Eventually(t, func() bool { // the stale client reconnects after a backoff
		ok, err := guardedPut(ctx, stale.cli, fence1, resource, "stale again")
		refused = err == nil && !ok
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)
	require.True(t, refused, "the stale holder's guarded write went through")
	resp, err := next.cli.Get(ctx, resource)
	require.NoError(t, err)
	require.Equal(t, "next", string(resp.Kvs[0].Value))

	select {
	case <-fence1.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the stale holder's Done was not closed")
	}
	tok1.Release() // its permits went with the lease: nothing to do
}

// A token's Done is closed when its last part ends, not before, and its
// IsHeld fails from then on; another token's fence is untouched.
func TestFenceEndsWithItsToken(t *testing.T) {
	srv := startServer(t)
	h := newHandle(t, srv, prefixFor(t), 3, 3, handleOpts{})
	ctx := testCtx(t)
	resource := "/resource/" + t.Name()
	tok, fence, err := h.AcquireFenced(ctx, 2)
	require.NoError(t, err)
	other, otherFence, err := h.AcquireFenced(ctx, 1)
	require.NoError(t, err)

	part, ok := tok.Split(1)
	require.True(t, ok)
	part.Release()
	select {
	case <-fence.Done():
		t.Fatal("Done closed while a part still holds")
	default:
	}
	ok, err = guardedPut(ctx, h.cli, fence, resource, "a")
	require.NoError(t, err)
	require.True(t, ok, "a part still holds")

	tok.Release()
	<-fence.Done()
	ok, err = guardedPut(ctx, h.cli, fence, resource, "b")
	require.NoError(t, err)
	require.False(t, ok, "a released token's fence still holds")

	ok, err = guardedPut(ctx, h.cli, otherFence, resource, "c")
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case <-otherFence.Done():
		t.Fatal("another token's Done closed")
	default:
	}
	other.Release()

	var zero etcdsem.Fence
	require.Nil(t, zero.Done())
	ok, err = guardedPut(ctx, h.cli, zero, resource, "d")
	require.NoError(t, err)
	require.False(t, ok, "the zero Fence fences")
	_, _, err = h.AcquireFenced(ctx, 0)
	require.ErrorIs(t, err, etcdsem.ErrInvalidPermits)
}
