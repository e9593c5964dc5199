package adaptivebench_test

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive/adaptivetest"
)

var long = flag.Bool("adaptive.long", false,
	"run the side-by-side simulation with one-minute phases as well, for limiters that adapt once a second")

// TestSimulationSideBySide runs adaptivetest.Evaluate against every peer
// and logs the table docs/adaptive.md reports, with the standard phases of
// four seconds and, with -adaptive.long, of a minute. It checks the claim of
// the comparison: package adaptive's Gradient2, its default controller, is
// at least as good as each other library's limiter on goodput and on p99
// latency. In minute-long phases a peer that keeps a standing queue of
// several times the capacity can reach a goodput of 1.00, against which
// Gradient2's probes cost it up to a point (0.99, with a p99 under half the
// peer's); there the goodput claim holds within 0.02.
func TestSimulationSideBySide(t *testing.T) {
	lengths := []time.Duration{adaptivetest.PhaseLength}
	if *long {
		lengths = append(lengths, time.Minute)
	}
	for _, length := range lengths {
		reports := map[string]adaptivetest.Report{}
		var table strings.Builder
		fmt.Fprintf(&table, "phases of %v; settling in samples\n\n", length)
		fmt.Fprintln(&table, "| limiter | from below | from above | after halving | after doubling | goodput (min) | p99 (max) |")
		fmt.Fprintln(&table, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
		for _, p := range peers {
			synctest.Test(t, func(t *testing.T) {
				r := adaptivetest.Evaluate(p.simFor(adaptivetest.ServiceTime), length)
				reports[p.name] = r
				fmt.Fprintf(&table, "| %s | %s | %s | %s | %s | %.2f | %.2f× |\n", p.name,
					settle(r.FromBelow), settle(r.FromAbove), settle(r.Halved), settle(r.Doubled), r.Goodput, r.P99Ratio())
			})
		}
		t.Log("\n" + table.String())
		t.Log("\n" + phaseTable(reports, length))

		ref := reports["adaptive-gradient2"]
		for _, p := range peers {
			if strings.HasPrefix(p.name, "adaptive-") {
				continue
			}
			r := reports[p.name]
			slack := 0.0
			if length != adaptivetest.PhaseLength {
				slack = 0.02
			}
			require.GreaterOrEqual(t, ref.Goodput+slack, r.Goodput, "goodput against %s", p.name)
			require.LessOrEqual(t, ref.P99, r.P99, "p99 against %s", p.name)
		}
	}
}

func settle(n int) string {
	if n < 0 {
		return "never"
	}
	return fmt.Sprint(n)
}

// phaseTable formats the second half of every phase of every run: the
// range of the limit, goodput and latency.
func phaseTable(reports map[string]adaptivetest.Report, length time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "second half of each phase of %v: limit min–max (mean), goodput, p50, p99\n\n", length)
	fmt.Fprintln(&b, "| limiter | run | C | limit | goodput | p50 | p99 | dropped | shed |")
	fmt.Fprintln(&b, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, p := range peers {
		r := reports[p.name]
		for _, run := range []string{"below", "above", "follow"} {
			for _, ph := range r.Runs[run] {
				fmt.Fprintf(&b, "| %s | %s | %d | %d–%d (%.0f) | %.2f | %v | %v | %d | %d |\n", p.name, run, ph.Capacity,
					ph.MinLimit, ph.MaxLimit, ph.MeanLimit, ph.Goodput, ph.P50, ph.P99, ph.Dropped, ph.Shed)
			}
		}
	}
	return b.String()
}
