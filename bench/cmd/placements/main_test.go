package main

import (
	"math"
	"strings"
	"testing"
)

// near reports whether got is within tol of want.
func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestParseTakesTheLabelsOutOfTheRow(t *testing.T) {
	r, ok := parse("BenchmarkContended/impl=atomicsem/tree=after/place=3/limit=1-2 \t 1000\t 250.5 ns/op\t 301.0 cpu-ns/op\t 0 allocs/op")
	if !ok {
		t.Fatal("a labelled benchmark line was not parsed")
	}
	if r.row != "BenchmarkContended/limit=1-2" || r.impl != "atomicsem" || r.tree != "after" || r.place != "3" {
		t.Fatalf("parsed %+v", r)
	}
	if r.values["cpu-ns/op"] != 301 || r.values["ns/op"] != 250.5 || r.values["allocs/op"] != 0 {
		t.Fatalf("values %v", r.values)
	}
	for _, line := range []string{
		"BenchmarkContended/impl=atomicsem/limit=1-2 1000 250 ns/op", // no tree or place
		"goos: linux",
		"PASS",
	} {
		if _, ok := parse(line); ok {
			t.Errorf("parsed %q", line)
		}
	}
}

// twoBuilds is two rounds of two builds of one tree. The builds run at
// different speeds and the second round is slower than the first for both,
// but within each build and round the subject costs 1.1× the baseline;
// pairing across builds or rounds would give other ratios.
const twoBuilds = `
BenchmarkX/impl=s/tree=a/place=0-2	1	110 cpu-ns/op
BenchmarkX/impl=b/tree=a/place=0-2	1	100 cpu-ns/op
BenchmarkX/impl=s/tree=a/place=1-2	1	220 cpu-ns/op
BenchmarkX/impl=b/tree=a/place=1-2	1	200 cpu-ns/op
BenchmarkX/impl=s/tree=a/place=0-2	1	330 cpu-ns/op
BenchmarkX/impl=b/tree=a/place=0-2	1	300 cpu-ns/op
BenchmarkX/impl=s/tree=a/place=1-2	1	440 cpu-ns/op
BenchmarkX/impl=b/tree=a/place=1-2	1	400 cpu-ns/op
`

func TestPooledPairsWithinBuildAndRound(t *testing.T) {
	rs := read(strings.NewReader(twoBuilds), "cpu-ns/op")
	got := rs.pooled("BenchmarkX-2", "a", "s", "b")
	if len(got) != 4 {
		t.Fatalf("pooled %d ratios, want 4 (two builds × two rounds)", len(got))
	}
	for _, r := range got {
		if !near(r, 1.1, 1e-9) {
			t.Fatalf("ratios %v, want 1.1 each", got)
		}
	}
}

func TestReportComparesTwoTrees(t *testing.T) {
	// Tree c is tree a with the subject 10 % cheaper: 0.99× in every pair.
	c := strings.ReplaceAll(twoBuilds, "tree=a", "tree=c")
	for before, after := range map[string]string{"110 ": "99 ", "220 ": "198 ", "330 ": "297 ", "440 ": "396 "} {
		c = strings.ReplaceAll(c, "\t"+before, "\t"+after)
	}
	var out strings.Builder
	read(strings.NewReader(twoBuilds+c), "cpu-ns/op").report(&out, "s", "b")
	text := out.String()
	for _, want := range []string{"a: s/b", "c: s/b", "BenchmarkX-2", "1.100×", "0.990×", "-10.0 %"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
}
