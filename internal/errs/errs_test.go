package errs_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/internal/errs"
)

var errBase = errors.New("base: invalid thing")

func TestErrorfSpeaksItsOwnWordsAndMatchesTheKind(t *testing.T) {
	err := errs.Errorf(errBase, "mine: a thing of %d", 3)
	require.EqualError(t, err, "mine: a thing of 3")
	require.ErrorIs(t, err, errBase)
	wrapped := fmt.Errorf("outer: %w", err)
	require.ErrorIs(t, wrapped, errBase)
}

func TestReprefixReplacesThePackageName(t *testing.T) {
	inner := fmt.Errorf("%w: NaN credits per second", errBase)
	err := errs.Reprefix("mine", inner)
	require.EqualError(t, err, "mine: invalid thing: NaN credits per second")
	require.ErrorIs(t, err, errBase)
	require.ErrorIs(t, err, inner)
	require.NoError(t, errs.Reprefix("mine", nil))
	require.EqualError(t, errs.Reprefix("mine", errors.New("no package name here")), "mine: no package name here")
}
