package semcontract_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/semcontract"
)

// mine is an implementation's own sentinel that matches a contract
// sentinel, as etcdsem's do.
type mine struct{ core error }

func (e mine) Error() string        { return "mine: " + e.core.Error() }
func (e mine) Is(target error) bool { return target == e.core }

func TestCheckRequestNamesTheRuleBroken(t *testing.T) {
	const max = 10
	tests := []struct {
		name string
		n    int64
		want error // nil, ErrInvalidPermits or ErrExceedsMax
	}{
		{"zero", 0, nil},
		{"one", 1, nil},
		{"the maximum", max, nil},
		{"above the maximum", max + 1, semcontract.ErrExceedsMax},
		{"MaxPermits, above the maximum", semcontract.MaxPermits, semcontract.ErrExceedsMax},
		{"negative", -1, semcontract.ErrInvalidPermits},
		{"above MaxPermits", semcontract.MaxPermits + 1, semcontract.ErrInvalidPermits},
	}
	for _, tt := range tests {
		err := semcontract.CheckRequest(tt.n, max, semcontract.ErrInvalidPermits, semcontract.ErrExceedsMax)
		if tt.want == nil {
			require.NoError(t, err, tt.name)
			continue
		}
		require.ErrorIs(t, err, tt.want, tt.name)
		other := semcontract.ErrInvalidPermits
		if tt.want == other {
			other = semcontract.ErrExceedsMax
		}
		require.False(t, errors.Is(err, other), tt.name)
	}
}

func TestCheckRequestWrapsTheCallersSentinels(t *testing.T) {
	invalid, exceeds := mine{semcontract.ErrInvalidPermits}, mine{semcontract.ErrExceedsMax}

	err := semcontract.CheckRequest(-1, 10, invalid, exceeds)
	require.ErrorIs(t, err, invalid)
	require.ErrorIs(t, err, semcontract.ErrInvalidPermits)
	require.EqualError(t, err, "mine: atomicsem: invalid number of permits: -1 is outside [0, 1073741823]")

	err = semcontract.CheckRequest(11, 10, invalid, exceeds)
	require.ErrorIs(t, err, exceeds)
	require.ErrorIs(t, err, semcontract.ErrExceedsMax)
	require.EqualError(t, err, "mine: atomicsem: exceeds the semaphore's maximum: requested 11, max 10")
}

func TestMaxPermitsIsThirtyBits(t *testing.T) {
	require.Equal(t, int64(1<<30-1), int64(semcontract.MaxPermits))
}

func TestCheckNewNamesTheArguments(t *testing.T) {
	for _, ok := range [][2]int64{{0, 0}, {0, 1}, {1, 1}, {0, semcontract.MaxPermits}, {semcontract.MaxPermits, semcontract.MaxPermits}} {
		require.NoError(t, semcontract.CheckNew(ok[0], ok[1], semcontract.ErrInvalidPermits), "New(%d, %d)", ok[0], ok[1])
	}
	for _, bad := range [][2]int64{{-1, 1}, {2, 1}, {0, semcontract.MaxPermits + 1}, {0, -1}} {
		err := semcontract.CheckNew(bad[0], bad[1], mine{semcontract.ErrInvalidPermits})
		require.ErrorIs(t, err, semcontract.ErrInvalidPermits, "New(%d, %d)", bad[0], bad[1])
		require.ErrorContains(t, err, "needs 0 ≤ initial ≤ max ≤ 1073741823")
	}
}

func TestCheckLimitNamesTheRuleBroken(t *testing.T) {
	const max = 10
	for _, ok := range []int64{0, 1, max} {
		require.NoError(t, semcontract.CheckLimit(ok, max, semcontract.ErrInvalidPermits, semcontract.ErrExceedsMax))
	}
	err := semcontract.CheckLimit(-1, max, semcontract.ErrInvalidPermits, semcontract.ErrExceedsMax)
	require.ErrorIs(t, err, semcontract.ErrInvalidPermits)
	require.EqualError(t, err, "atomicsem: invalid number of permits: SetLimit(-1)")
	err = semcontract.CheckLimit(max+1, max, semcontract.ErrInvalidPermits, semcontract.ErrExceedsMax)
	require.ErrorIs(t, err, semcontract.ErrExceedsMax)
	require.EqualError(t, err, "atomicsem: exceeds the semaphore's maximum: SetLimit(11) with max 10")
}
