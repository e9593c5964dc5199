package semcontract_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestContractSitsBelowItsImplementations keeps the floors of
// docs/design.md: the contract and the suites never import an
// implementation, so a second backend can use them without the first.
func TestContractSitsBelowItsImplementations(t *testing.T) {
	const mod = "github.com/atomicsem/atomicsem/"
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the imports with")
	}
	for pkg, impl := range map[string]string{
		"semcontract": "atomicsem",
		"semtest":     "atomicsem",
		"credittest":  "credit",
	} {
		out, err := exec.Command(gotool, "list", "-deps", mod+pkg).CombinedOutput()
		require.NoError(t, err, string(out))
		deps := strings.Fields(string(out))
		require.Contains(t, deps, mod+pkg, "go list names the package itself")
		require.NotContains(t, deps, mod+impl, "%s imports %s", pkg, impl)
	}
}
