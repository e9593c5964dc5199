package semcontract_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestContractSitsBelowItsImplementations keeps the floors of
// docs/design.md: the contract and the conformance suite never import an
// implementation, so a second backend can use both without the first.
func TestContractSitsBelowItsImplementations(t *testing.T) {
	const impl = "github.com/atomicsem/atomicsem/atomicsem"
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the imports with")
	}
	for _, pkg := range []string{
		"github.com/atomicsem/atomicsem/semcontract",
		"github.com/atomicsem/atomicsem/semtest",
	} {
		out, err := exec.Command(gotool, "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, string(out))
		deps := strings.Fields(string(out))
		require.Contains(t, deps, pkg, "go list names the package itself")
		require.NotContains(t, deps, impl, "%s imports %s", pkg, impl)
	}
}
