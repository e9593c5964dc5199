package main

import (
	"math"
	"strings"
	"testing"
)

// near reports whether got is within 1e-9 of want.
func near(got, want float64) bool { return math.Abs(got-want) < 1e-9 }

// shiftedRun is three rounds of two benchmarks on a machine whose speed
// shifts between a fast and a threefold slower regime. a costs 1.2× b in the
// first round (fast) and the second (slow); in the third the machine is slow
// for a and fast again for b. Two of a's three samples are slow and two of
// b's are fast, so the ratio of medians sets a slow median against a fast
// one, where the paired median compares each round with itself.
const shiftedRun = `
BenchmarkX/impl=a-2	100	120 ns/op	0 allocs/op
BenchmarkX/impl=b-2	100	100 ns/op	0 allocs/op
BenchmarkX/impl=a-2	100	360 ns/op	0 allocs/op
BenchmarkX/impl=b-2	100	300 ns/op	0 allocs/op
BenchmarkX/impl=a-2	100	366 ns/op	0 allocs/op
BenchmarkX/impl=b-2	100	100 ns/op	0 allocs/op
`

func read(t *testing.T, raw string) samples {
	t.Helper()
	s := samples{}
	s.read(strings.NewReader(raw))
	return s
}

func TestPairedRatiosPairRoundByRound(t *testing.T) {
	s := read(t, shiftedRun)
	q, ok := s.pairedRatios("BenchmarkX/impl=a", "BenchmarkX/impl=b", "ns/op")
	if !ok {
		t.Fatal("three samples each did not pair up")
	}
	// Per round: 1.2, 1.2, 3.66; the quartiles interpolate between them.
	if want := [3]float64{1.2, 1.2, (1.2 + 3.66) / 2}; !near(q[0], want[0]) || !near(q[1], want[1]) || !near(q[2], want[2]) {
		t.Errorf("paired quartiles = %v, want %v", q, want)
	}

	// The ratio of medians sets a's slow median against b's fast one.
	num, _ := s.median("BenchmarkX/impl=a", "ns/op")
	den, _ := s.median("BenchmarkX/impl=b", "ns/op")
	if !near(num/den, 3.6) {
		t.Errorf("ratio of medians = %v, want 3.6", num/den)
	}
}

func TestPairedRatiosRefuseUnpairedSamples(t *testing.T) {
	s := read(t, shiftedRun+"BenchmarkX/impl=a-2\t100\t120 ns/op\n")
	if _, ok := s.pairedRatios("BenchmarkX/impl=a", "BenchmarkX/impl=b", "ns/op"); ok {
		t.Error("four samples against three paired up")
	}
	if _, ok := s.pairedRatios("BenchmarkX/impl=a", "BenchmarkX/impl=missing", "ns/op"); ok {
		t.Error("samples paired up with a benchmark that has none")
	}
	zero := read(t, "BenchmarkX/impl=a-2\t1\t5 allocs/op\nBenchmarkX/impl=b-2\t1\t0 allocs/op\n")
	if _, ok := zero.pairedRatios("BenchmarkX/impl=a", "BenchmarkX/impl=b", "allocs/op"); ok {
		t.Error("a zero baseline gave a ratio")
	}
}

// A target whose ratio of medians and paired ratio disagree shows both
// verdicts. Here atomicsem costs 1.2× chan in each round that runs in one
// regime; in the second the machine slows between the two, so two of
// atomicsem's three samples are fast and two of chan's slow.
func TestReportShowsBothVerdictsWhenTheyDiffer(t *testing.T) {
	s := read(t, `
BenchmarkContended/impl=atomicsem/limit=4-2	1	120 ns/op
BenchmarkContended/impl=chan/limit=4-2	1	100 ns/op
BenchmarkContended/impl=atomicsem/limit=4-2	1	120 ns/op
BenchmarkContended/impl=chan/limit=4-2	1	300 ns/op
BenchmarkContended/impl=atomicsem/limit=4-2	1	360 ns/op
BenchmarkContended/impl=chan/limit=4-2	1	300 ns/op
`)
	var out strings.Builder
	s.report(&out)
	var line string
	for l := range strings.Lines(out.String()) {
		if strings.HasPrefix(l, "contended FIFO limit=4 vs chan ") {
			line = l
		}
	}
	if !strings.Contains(line, "0.40×") || !strings.Contains(line, "1.20× [0.80–1.20]") ||
		!strings.HasSuffix(strings.TrimSpace(line), "yes (paired: NO)") {
		t.Errorf("report line = %q, want the ratio of medians 0.40× met and the paired 1.20× not", line)
	}
}
