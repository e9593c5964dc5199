package atomicsem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// Split works for every token the semaphore hands out: taken at once, or
// granted to a parked Acquire (whose waiter record the split gives back,
// once). Each part ends on its own, released or forgotten, and the
// semaphore accounts for each exactly.
func TestSplitTokensEndPartByPart(t *testing.T) {
	tests := []struct {
		name    string
		granted bool // the token comes from a parked Acquire's hand-off
	}{
		{name: "taken at once"},
		{name: "granted to a parked Acquire", granted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustNew(t, 10, 10)
			var whole *token.Token
			if tt.granted {
				p := grantedByHandOff(t, s, 10)
				whole = &p.tok
			} else {
				whole = mustTake(t, s, 10)
			}
			spent, ok := whole.Split(3)
			require.True(t, ok)
			require.Empty(t, atomicsem.FreeListError(s))
			back, ok := whole.Split(2)
			require.True(t, ok)
			require.Equal(t, []int64{5, 3, 2}, []int64{whole.Permits(), spent.Permits(), back.Permits()})

			spent.Forget()
			require.Equal(t, counts{Available: 0, Held: 7, Limit: 7}, countsOf(s))
			back.Release()
			require.Equal(t, counts{Available: 2, Held: 5, Limit: 7}, countsOf(s))
			whole.Release()
			require.Equal(t, atomicsem.Stats{Available: 7, Limit: 7, Max: 10}, s.Stats())
			require.Empty(t, atomicsem.FreeListError(s))
		})
	}
}
