package adaptivebench_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
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
				verdicts[sc.Name][p.name] = sc.Run(p.simFor(sc.Config.ServiceTime))
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
			fmt.Fprintf(&b, " %s |", passOrMiss(verdicts[sc.Name][p.name].Pass))
		}
		fmt.Fprintln(&b)
	}
	fmt.Fprint(&b, "\nthe figures judged\n\n")
	fmt.Fprintln(&b, "| scenario | limiter | verdict | figures |")
	fmt.Fprintln(&b, "| --- | --- | --- | --- |")
	for _, sc := range scenarios {
		for _, p := range peers {
			v := verdicts[sc.Name][p.name]
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", sc.Name, p.name, passOrMiss(v.Pass), v.Figures)
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

// TestAIMDTimeout runs AIMD through every failure scenario with its
// Timeout at several margins above the latency of the scenario's typical
// request, and once, for the bimodal service, above its slow requests'
// latency instead, and logs what each passes: the table behind
// docs/adaptive.md's advice on setting Timeout. It checks the margin that
// advice gives, 1.1, passes every scenario.
func TestAIMDTimeout(t *testing.T) {
	if raceBuild {
		t.Skip("a report; package adaptive's TestFailureScenarios runs AIMD with its recommended Timeout under -race")
	}
	// A row sets Timeout at margin times the latency of the scenario's
	// typical request, or of its slowest if slowest is set.
	type row struct {
		name    string
		margin  float64
		slowest bool
	}
	var rows []row
	for _, m := range []float64{1.05, 1.1, 1.2, 1.5, 2} {
		rows = append(rows, row{name: fmt.Sprintf("%g × the typical request's", m), margin: m})
	}
	rows = append(rows, row{name: "1.2 × the slowest request's", margin: 1.2, slowest: true})

	shown := []string{"bimodal latency", "client-cancel storm"}
	var b strings.Builder
	fmt.Fprint(&b, "AIMD's Timeout, above the latency of a request without a queue\n\n")
	fmt.Fprintf(&b, "| Timeout | scenarios passed | missed | %s |\n| --- | :---: | --- |%s\n",
		strings.Join(shown, " | "), strings.Repeat(" --- |", len(shown)))
	passedAll := map[string]bool{}
	for _, r := range rows {
		var missed []string
		figures := map[string]string{}
		for _, sc := range adaptivetest.Scenarios() {
			latency := sc.Config.ServiceTime
			if r.slowest {
				for _, ph := range sc.Config.Phases {
					latency = max(latency, ph.SlowTime)
				}
			}
			newAIMD := aimdTimeout(r.margin)
			to := newAIMD(latency).(*adaptive.AIMD).Timeout
			synctest.Test(t, func(t *testing.T) {
				v := sc.Run(ours("adaptive-aimd", newAIMD).simFor(latency))
				if !v.Pass {
					missed = append(missed, sc.Name)
				}
				figures[sc.Name] = fmt.Sprintf("%s (%v): %s", passOrMiss(v.Pass), to, v.Figures)
			})
		}
		n := len(adaptivetest.Scenarios())
		passedAll[r.name] = len(missed) == 0
		fmt.Fprintf(&b, "| %s | %d of %d | %s |", r.name, n-len(missed), n, strings.Join(missed, ", "))
		for _, name := range shown {
			fmt.Fprintf(&b, " %s |", figures[name])
		}
		fmt.Fprintln(&b)
	}
	t.Log("\n" + b.String())
	require.True(t, passedAll["1.1 × the typical request's"], "AIMD with the recommended Timeout misses a scenario")
}

// passOrMiss is a verdict as the tables write it.
func passOrMiss(pass bool) string {
	if pass {
		return "pass"
	}
	return "miss"
}
