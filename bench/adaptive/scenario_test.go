package adaptivebench_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive/adaptivetest"
)

// TestFailureScenariosSideBySide runs every limiter through each of
// adaptivetest's failure scenarios and logs the tables docs/adaptive.md
// reports: which pass each criterion, and the figures judged. It checks
// the claim of the comparison: package adaptive's Gradient2, its default
// controller, passes at least as many scenarios as any other limiter.
//
// It is a report of other libraries' behaviour, whose run under the race
// detector would find nothing of this repository's that package adaptive's
// TestFailureScenarios does not, at several times the cost: it runs
// without -race only.
func TestFailureScenariosSideBySide(t *testing.T) {
	if raceBuild {
		t.Skip("a report of the peers; package adaptive's TestFailureScenarios runs this package's controllers under -race")
	}
	scenarios := adaptivetest.Scenarios()
	verdicts := map[string]map[string]adaptivetest.Verdict{} // scenario, limiter
	for _, sc := range scenarios {
		verdicts[sc.Name] = map[string]adaptivetest.Verdict{}
		for _, p := range peers {
			synctest.Test(t, func(t *testing.T) {
				verdicts[sc.Name][p.name] = sc.Run(p.sim)
			})
		}
	}

	var b strings.Builder
	fmt.Fprint(&b, "failure scenarios: pass or miss\n\n")
	fmt.Fprint(&b, "| scenario |")
	for _, p := range peers {
		fmt.Fprintf(&b, " %s |", p.name)
	}
	fmt.Fprint(&b, "\n| --- |")
	for range peers {
		fmt.Fprint(&b, " :---: |")
	}
	fmt.Fprintln(&b)
	for _, sc := range scenarios {
		fmt.Fprintf(&b, "| %s |", sc.Name)
		for _, p := range peers {
			mark := "miss"
			if verdicts[sc.Name][p.name].Pass {
				mark = "pass"
			}
			fmt.Fprintf(&b, " %s |", mark)
		}
		fmt.Fprintln(&b)
	}
	fmt.Fprint(&b, "\nthe figures judged\n\n")
	fmt.Fprintln(&b, "| scenario | limiter | verdict | figures |")
	fmt.Fprintln(&b, "| --- | --- | --- | --- |")
	for _, sc := range scenarios {
		for _, p := range peers {
			v := verdicts[sc.Name][p.name]
			mark := "miss"
			if v.Pass {
				mark = "pass"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", sc.Name, p.name, mark, v.Figures)
		}
	}
	t.Log("\n" + b.String())

	passes := func(name string) int {
		n := 0
		for _, sc := range scenarios {
			if verdicts[sc.Name][name].Pass {
				n++
			}
		}
		return n
	}
	for _, p := range peers {
		require.GreaterOrEqual(t, passes("adaptive-gradient2"), passes(p.name), "scenarios passed, against %s", p.name)
	}
}
