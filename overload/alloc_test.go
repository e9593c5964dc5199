package overload_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/overload"
)

// TestAdmissionDoesNotAllocate checks the operations that never wait, for
// every number of classes: a token is a value and the decision one CAS, so
// admitting and releasing must not touch the heap.
func TestAdmissionDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's token tracking allocates")
	}
	ctx := context.Background()
	for k := 1; k <= overload.MaxClasses; k++ {
		cl := classes(make([]float64, k)...)
		cl[0].Share, cl[k-1].MaxShare = 0.25, 0.5
		g := overload.MustNew(4, 4, cl)
		for c := range k {
			t.Run(fmt.Sprintf("k=%d/class=%d", k, c), func(t *testing.T) {
				allocs := testing.AllocsPerRun(200, func() {
					tok, err := g.Acquire(ctx, c, 1)
					if err != nil {
						t.Fatal(err)
					}
					tok.Release()
					tok, ok := g.TryAcquire(c, 1)
					if !ok {
						t.Fatal("TryAcquire failed on a free gate")
					}
					tok.Release()
				})
				require.Zero(t, allocs)
			})
		}
		require.Zero(t, testing.AllocsPerRun(100, func() { _ = g.SetLimit(3) }), "SetLimit")
	}
}

// TestInliningFactsTheCommentsRelyOn checks what the fast paths' comments
// say the compiler does: it inlines fits into Acquire and TryAcquire, and
// releaseFast into the token owner's ReturnPermits, so that an uncontended
// admission and release make no call of their own. The costs and what each
// has left of the budget are logged on every run: a change that spends the
// margin makes the next one push the function over.
func TestInliningFactsTheCommentsRelyOn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package with -gcflags=-m")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build with")
	}
	// The facts are amd64's, where the 64-bit atomics are intrinsics.
	cmd := exec.CommandContext(t.Context(), goTool, "build", "-o", os.DevNull, "-gcflags=-m=2", "./overload")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOARCH=amd64")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	const budget = 80
	for _, fn := range []struct {
		name   string
		margin int // the budget less the cost when this was written
	}{
		{"(*Gate).fits", 0},
		{"(*Gate).releaseFast", 2},
	} {
		prefix := "can inline " + fn.name + " with cost "
		cost := -1
		for _, line := range strings.Split(string(out), "\n") {
			if _, rest, ok := strings.Cut(line, prefix); ok {
				c, _, _ := strings.Cut(rest, " ")
				cost, _ = strconv.Atoi(c)
			}
		}
		require.GreaterOrEqual(t, cost, 0, "%s is no longer inlinable (it had %d to spare)", fn.name, fn.margin)
		t.Logf("%s: cost %d of %d, %d to spare (was %d)", fn.name, cost, budget, budget-cost, fn.margin)
	}
	for _, fact := range []struct{ file, call string }{
		{"overload/acquire.go", "inlining call to (*Gate).fits"},
		{"overload/release.go", "inlining call to (*Gate).releaseFast"},
	} {
		found := false
		for _, line := range strings.Split(string(out), "\n") {
			found = found || strings.Contains(line, fact.file) && strings.Contains(line, fact.call)
		}
		require.True(t, found, "%s: no %q", fact.file, fact.call)
	}
}
