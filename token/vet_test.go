package token_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVetReportsCopiesAsTheDocSays holds Token's doc (and the README) to
// what go vet does: it vets testdata/vetcopies, whose every line says
// whether vet reports it, and requires vet to report exactly the lines
// marked "reported", each in the words the doc quotes.
func TestVetReportsCopiesAsTheDocSays(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to vet with")
	}
	src, err := os.ReadFile("testdata/vetcopies/main.go")
	require.NoError(t, err)
	var want []int
	for i, line := range strings.Split(string(src), "\n") {
		if strings.Contains(line, "// vet: reported") {
			want = append(want, i+1)
		}
	}
	require.NotEmpty(t, want)

	out, err := exec.CommandContext(t.Context(), goTool, "vet", "./testdata/vetcopies").CombinedOutput()
	require.Error(t, err, "vet reported nothing:\n%s", out)
	report := regexp.MustCompile(`main\.go:(\d+):\d+: (.*)`)
	var got []int
	for _, m := range report.FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.Atoi(m[1])
		got = append(got, n)
		require.Contains(t, m[2], "lock", "line %d", n)
		require.True(t, strings.HasSuffix(m[2],
			"github.com/atomicsem/atomicsem/token.Token contains github.com/atomicsem/atomicsem/token.ownerTag"),
			"line %d: %s", n, m[2])
	}
	slices.Sort(got)
	got = slices.Compact(got)
	require.Equal(t, want, got, "vet's reports:\n%s", out)
}
