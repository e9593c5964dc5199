package etcdsem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

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

func TestFirstInLineTakesAConfigChangeWithoutARead(t *testing.T) {
	w := etcdsem.NewEventWaiter(1, []etcdsem.WalkKey{{Name: "h", N: 1, Held: true}, {Name: "me", N: 1}}, "me", []string{"h"})
	require.True(t, w.SetLimit(2), "its view is exact for every key that can admit it")
}
