package etcdsem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/etcdsem"
)

// The grant rules on fixed views: the in-process semaphore's FIFO rules,
// as a pure function of the keys in arrival order and the limit.
func TestAdmittedFollowsTheInProcessRules(t *testing.T) {
	wait := func(name string, n int64) etcdsem.WalkKey { return etcdsem.WalkKey{Name: name, N: n} }
	held := func(name string, n int64) etcdsem.WalkKey { return etcdsem.WalkKey{Name: name, N: n, Held: true} }
	tests := []struct {
		name    string
		limit   int64
		closed  bool
		keys    []etcdsem.WalkKey
		arrival *etcdsem.WalkKey
		want    []string
	}{
		{name: "empty", limit: 3},
		{name: "the prefix that fits", limit: 4,
			keys: []etcdsem.WalkKey{wait("a", 1), wait("b", 1), wait("c", 3), wait("d", 1)},
			want: []string{"a", "b"}},
		{name: "a front that does not fit holds back the rest", limit: 3,
			keys: []etcdsem.WalkKey{held("h", 2), wait("a", 2), wait("b", 1)}},
		{name: "a waiter above the limit is passed over", limit: 2,
			keys: []etcdsem.WalkKey{wait("big", 5), wait("a", 1), wait("b", 1), wait("c", 1)},
			want: []string{"a", "b"}},
		{name: "holders count, wherever they arrived", limit: 4,
			keys: []etcdsem.WalkKey{wait("a", 1), held("h", 2), wait("b", 1), wait("c", 1)},
			want: []string{"a", "b"}},
		{name: "in debt nobody is admitted", limit: 1,
			keys: []etcdsem.WalkKey{held("h", 3), wait("a", 1)}},
		{name: "closed admits nobody", limit: 5, closed: true,
			keys: []etcdsem.WalkKey{wait("a", 1)}},
		{name: "an arrival behind no waiter takes what is free", limit: 2,
			keys:    []etcdsem.WalkKey{held("h", 1)},
			arrival: &etcdsem.WalkKey{Name: "new", N: 1},
			want:    []string{"new"}},
		{name: "an arrival does not overtake a waiter that fits the limit", limit: 2,
			keys:    []etcdsem.WalkKey{held("h", 1), wait("a", 2)},
			arrival: &etcdsem.WalkKey{Name: "new", N: 1}},
		{name: "an arrival passes a waiter above the limit", limit: 2,
			keys:    []etcdsem.WalkKey{held("h", 1), wait("big", 3)},
			arrival: &etcdsem.WalkKey{Name: "new", N: 1},
			want:    []string{"new"}},
		{name: "an arrival comes after admitted waiters", limit: 3,
			keys:    []etcdsem.WalkKey{wait("a", 1), wait("b", 1)},
			arrival: &etcdsem.WalkKey{Name: "new", N: 1},
			want:    []string{"a", "b", "new"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, etcdsem.Admitted(tt.limit, tt.closed, tt.keys, tt.arrival))
		})
	}
}
