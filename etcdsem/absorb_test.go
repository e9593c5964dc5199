package etcdsem_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/atomicsem/atomicsem/etcdsem"
)

// queue is a holder h and the waiters b, a and me, in arrival order, each
// of weight 1.
var queue = []etcdsem.WalkKey{{Name: "h", N: 1, Held: true}, {Name: "b", N: 1}, {Name: "a", N: 1}, {Name: "me", N: 1}}

func TestGrantAheadThatTakesTheLimitLeavesItTheOnlyHolder(t *testing.T) {
	w := etcdsem.NewEventWaiter(1, queue, "me", []string{"a"})
	require.True(t, w.Put("a", true, 1), "the grant needs no read")
	require.Equal(t, map[string]string{"a": "held 1", "me": "wait 1"}, w.Keys())
	require.True(t, w.Delete("a"), "the only holder's release needs no read")
	require.Equal(t, map[string]string{"me": "wait 1"}, w.Keys())
}

// A watch that catches up (after a reconnect) delivers the grant ahead
// and the release that followed it in one response. Taken as a grant
// alone, the released key would stay a holder in the waiter's view, and
// the waiter would wait for ever on a key that is gone.
func TestGrantAndReleaseInOneResponseNeedsARead(t *testing.T) {
	w := etcdsem.NewEventWaiter(1, queue, "me", []string{"a"})
	require.False(t, w.Batch(func() {
		w.Put("a", true, 1)
		w.Delete("a")
	}), "after the grant, the view holds a key that is gone")
	w = etcdsem.NewEventWaiter(3, queue, "me", []string{"a"})
	require.False(t, w.Batch(func() {
		w.Grant("a", 1, "", []string{"h", "b"}, true)
		w.Delete("a")
	}), "the note lists the holders as of the grant, not after")
}

func TestGrantAheadBelowTheLimitNeedsARead(t *testing.T) {
	w := etcdsem.NewEventWaiter(2, queue, "me", []string{"a"})
	require.False(t, w.Put("a", true, 1), "b may still hold beside a")
}

func TestConfigChangeAfterADerivedViewNeedsARead(t *testing.T) {
	// Under the new limit, b may have been granted beside a, which the
	// view derived from a's grant has dropped.
	w := etcdsem.NewEventWaiter(1, queue, "me", []string{"a"})
	require.True(t, w.Put("a", true, 1))
	require.False(t, w.SetLimit(2))
}

// Handles use key names again. A waiter first in line watches the
// holders' keys, so it sees a holder's key deleted and then a new key of
// the same name, a later arrival. The waiter's view holds none of the
// other keys that arrived after it, which may be ahead of that one, so it
// must leave the new key out: a batch grant computed with it would let
// it overtake them.
func TestKeyMadeAnewUnderAWatchedNameIsLeftOut(t *testing.T) {
	keys := []etcdsem.WalkKey{{Name: "h", N: 2, Held: true}, {Name: "me", N: 2}}
	w := etcdsem.NewEventWaiter(3, keys, "me", []string{"h"})
	require.True(t, w.Delete("h"), "first in line, it watches every holder")
	require.True(t, w.Put("h", false, 1))
	require.Equal(t, map[string]string{"me": "wait 2"}, w.Keys(), "a later arrival in a view that lacks the others")
}

func TestFirstInLineTakesAConfigChangeWithoutARead(t *testing.T) {
	w := etcdsem.NewEventWaiter(1, []etcdsem.WalkKey{{Name: "h", N: 1, Held: true}, {Name: "me", N: 1}}, "me", []string{"h"})
	require.True(t, w.SetLimit(2), "its view is exact for every key that can admit it")
}

func TestBatchThatReachesPastTheWaiterGrantsIt(t *testing.T) {
	w := etcdsem.NewEventWaiter(3, queue, "me", []string{"a"})
	require.True(t, w.Grant("a", 1, "me", nil, true), "the note says the batch reached it")
	require.Equal(t, "held 1", w.Keys()["me"])
	require.Equal(t, w.Mods()["me"], int64(len(queue)+2), "held since the grant's revision")
}

// A batch that names, as the grantee after the key ahead, a waiter that
// arrived after this one did not find this waiter's key in its view: the
// key is gone (its lease ended), and the waiter must not take itself as
// granted.
func TestBatchThatGoesOnPastTheWaiterNeedsARead(t *testing.T) {
	behind := append(slices.Clone(queue), etcdsem.WalkKey{Name: "c", N: 1})
	w := etcdsem.NewEventWaiter(3, behind, "me", []string{"a"})
	require.False(t, w.Grant("a", 1, "c", nil, true), "a grant that skipped the waiter's key")
	require.Equal(t, "wait 1", w.Keys()["me"])
}

func TestBatchThatEndsAheadLeavesTheWaiterFirstWithTheListedHolders(t *testing.T) {
	w := etcdsem.NewEventWaiter(3, queue, "me", []string{"a"})
	require.True(t, w.Grant("a", 1, "", []string{"h", "b"}, true), "the note lists the holders")
	require.Equal(t, map[string]string{"h": "held 1", "b": "held 1", "a": "held 1", "me": "wait 1"}, w.Keys())
	grant := int64(len(queue) + 2)
	require.Equal(t, map[string]int64{"h": 2, "b": grant, "a": grant, "me": 5}, w.Mods(),
		"a listed key the grant wrote is held since the grant")
	require.True(t, w.Delete("h"), "first in line, it watches every holder")
}

func TestGrantNoteUnderAnotherConfigNeedsARead(t *testing.T) {
	w := etcdsem.NewEventWaiter(3, queue, "me", []string{"a"})
	require.False(t, w.Grant("a", 1, "me", nil, false), "under another limit the batch may have passed it over")
	w = etcdsem.NewEventWaiter(3, queue, "me", []string{"a"})
	require.False(t, w.Grant("a", 1, "", []string{"h", "b"}, false))
}

func TestGrantNoteWithoutAListNeedsARead(t *testing.T) {
	w := etcdsem.NewEventWaiter(3, queue, "me", []string{"a"})
	require.False(t, w.Grant("a", 1, "", nil, true), "too many holders to list")
}

// A waiter that becomes first in line learns the holders from the note of
// the grant ahead of it instead of reading the semaphore, and compares
// them before it waits on them: here the note lists a holder that the
// same transaction deletes, so a waiter that trusted the list would wait
// for a release that has happened. It is granted after one compare (which
// fails and reads) and one grant.
func TestGrantNoteListingAGoneHolderIsComparedNotTrusted(t *testing.T) {
	srv := startServer(t)
	prefix := prefixFor(t)
	h := newHandle(t, srv, prefix, 2, 2, handleOpts{})
	ctx := testCtx(t)
	tok, err := h.Acquire(ctx, 1)
	require.NoError(t, err)
	defer tok.Release()
	var holder string
	for key := range keys(t, h.cli, prefix) {
		holder = key
	}

	// A waiter ahead whose owner never grants itself: the test grants it.
	ahead := prefix + "k/a"
	aheadSess := newSession(t, h.cli, 10)
	_, err = h.cli.Put(ctx, ahead, "wait 1", clientv3.WithLease(aheadSess.Lease()))
	require.NoError(t, err)

	w := newHandle(t, srv, prefix, 0, 2, handleOpts{})
	got := make(chan error, 1)
	go func() {
		tok, err := w.Acquire(ctx, 1)
		if err == nil {
			tok.Release()
		}
		got <- err
	}()
	require.Eventually(t, func() bool {
		n, err := w.Semaphore.Parked(ctx)
		return err == nil && n == 1
	}, 10*time.Second, time.Millisecond)

	cfg, err := h.cli.Get(ctx, prefix+"config")
	require.NoError(t, err)
	held, err := h.cli.Get(ctx, holder)
	require.NoError(t, err)
	holderMod := held.Kvs[0].ModRevision
	note := fmt.Sprintf("held 1 %d 0 h %s,%d,1", cfg.Kvs[0].ModRevision, strings.TrimPrefix(holder, prefix+"k/"), holderMod)
	calls := w.rpcs.calls.Load()
	_, err = h.cli.Txn(ctx).Then(clientv3.OpDelete(holder), clientv3.OpPut(ahead, note, clientv3.WithIgnoreLease())).Commit()
	require.NoError(t, err)
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter waits for a holder that is gone")
	}
	require.Equal(t, int64(3), w.rpcs.calls.Load()-calls, "a compare that reads, a grant and a release")
}
