package mutant_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/atomicsem/atomicsem/internal/mutant"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestEveryFaultHasItsTagFile guards the wiring that scripts/mutants.sh
// relies on: each fault has a file that sets Active under its own tag, and
// the default file is excluded by every tag, so that exactly one definition
// of Active is built whatever the tags.
func TestEveryFaultHasItsTagFile(t *testing.T) {
	none, err := os.ReadFile("none.go")
	require.NoError(t, err)
	constraint, _, _ := strings.Cut(string(none), "\n")
	excluded := strings.FieldsFunc(constraint, func(r rune) bool {
		return !(r == '_' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9')
	})
	for _, name := range mutant.All {
		tag := "mutant_" + name
		require.Contains(t, excluded, tag, "none.go must be excluded by %s", tag)
		src, err := os.ReadFile(tag + ".go")
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(src), "//go:build "+tag+"\n"), "%s.go must be built only with its tag", tag)
	}
}

// TestNormalBuildCarriesNoFault fails if a fault is built in: the check is
// only meaningful in a build without mutant tags, which is how go test ./...
// runs it; scripts/mutants.sh does not run this package.
func TestNormalBuildCarriesNoFault(t *testing.T) {
	require.Empty(t, mutant.Active)
}
