package atomicsem_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Comments in the library rely on what the compiler inlines: the fast
// paths of an acquire and of a token's end are inlined into their callers,
// the token's Release and Forget into code that imports atomicsem alone,
// and the dispatch's return of permits calls state.Word.Release inline. A
// change that pushes one of them over the inlining budget makes its
// comment false and the fast path slower; this test says which.
func TestInliningFactsTheCommentsRelyOn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the packages with -gcflags=-m")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build with")
	}
	build := func(pkgs ...string) string {
		args := append([]string{"build", "-o", "/dev/null", "-gcflags=-m"}, pkgs...)
		cmd := exec.CommandContext(t.Context(), goTool, args...)
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	lib := build("./atomicsem", "./token")
	for _, fact := range []string{
		"can inline (*Semaphore).acquireFast",
		"can inline (*Semaphore).releaseFast",
		"can inline (*Token).Release",
		"can inline (*Token).Forget",
	} {
		require.Contains(t, lib, fact)
	}
	require.True(t, hasLine(lib, "atomicsem/dispatch.go", "inlining call to state.Word.Release"),
		"releaseLocked no longer inlines state.Word.Release")
	require.True(t, hasLine(lib, "atomicsem/acquire.go", "inlining call to (*Semaphore).acquireFast"),
		"Acquire and TryAcquire no longer inline acquireFast")
	require.True(t, hasLine(lib, "atomicsem/release.go", "inlining call to (*Semaphore).releaseFast"),
		"the token owners no longer inline releaseFast")

	caller := build("./atomicsem/testdata/caller")
	require.Contains(t, caller, "inlining call to token.(*Token).Release",
		"a caller that imports atomicsem alone no longer inlines Release")
	require.Contains(t, caller, "inlining call to token.(*Token).Forget",
		"a caller that imports atomicsem alone no longer inlines Forget")
}

// hasLine reports whether out has a line from file that contains fact.
func hasLine(out, file, fact string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, file) && strings.Contains(line, fact) {
			return true
		}
	}
	return false
}
