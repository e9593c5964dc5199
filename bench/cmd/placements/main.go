// Command placements compares two trees of the library from the output of
// bench/placements.sh: for each benchmark row, the ratio of a subject to a
// baseline (atomicsem to chan, say), paired by round within each build,
// pooled over the builds of each tree, and a Mann–Whitney test of whether
// the two trees' pooled ratios differ.
//
// Usage:
//
//	go run ./cmd/placements [-metric cpu-ns/op] [-subject atomicsem] [-baseline chan] raw.txt
//
// placements.sh builds each tree several times with its code at different
// addresses and names every result BenchmarkX/impl=I/tree=T/place=P/...;
// the i-th result of a build is from its i-th round. A ratio is taken only
// between results of one build and one round, so a build's placement and a
// round's load on the machine, both of which move a parking row by several
// percent (docs/benchmarks.md, Noise), touch subject and baseline alike.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/atomicsem/atomicsem/bench/internal/stat"
)

// A result is one benchmark line, decoded.
type result struct {
	row, impl, tree, place string
	values                 map[string]float64 // by unit
}

// procsSuffix is the -GOMAXPROCS suffix that go test adds to names.
var procsSuffix = regexp.MustCompile(`-\d+$`)

// parse decodes a benchmark line, or reports false for any other line and
// for a benchmark without the three labels. The row is the name without
// them, the -GOMAXPROCS suffix kept.
func parse(line string) (result, bool) {
	fields := strings.Fields(line)
	if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
		return result{}, false
	}
	name := fields[0]
	suffix := procsSuffix.FindString(name)
	r := result{values: map[string]float64{}}
	var kept []string
	for _, elem := range strings.Split(strings.TrimSuffix(name, suffix), "/") {
		key, value, _ := strings.Cut(elem, "=")
		switch key {
		case "impl":
			r.impl = value
		case "tree":
			r.tree = value
		case "place":
			r.place = value
		default:
			kept = append(kept, elem)
		}
	}
	if r.impl == "" || r.tree == "" || r.place == "" {
		return result{}, false
	}
	r.row = strings.Join(kept, "/") + suffix
	for i := 2; i+1 < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			continue
		}
		r.values[fields[i+1]] = v
	}
	return r, true
}

// build names the results of one build of one tree in one row.
type build struct{ row, tree, place, impl string }

// runs holds every build's samples of one metric, in round order, and the
// rows and trees in the order first seen.
type runs struct {
	samples map[build][]float64
	rows    []string
	trees   []string
}

func read(r io.Reader, metric string) runs {
	rs := runs{samples: map[build][]float64{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		res, ok := parse(sc.Text())
		if !ok {
			continue
		}
		v, ok := res.values[metric]
		if !ok {
			continue
		}
		b := build{res.row, res.tree, res.place, res.impl}
		rs.samples[b] = append(rs.samples[b], v)
		if !slices.Contains(rs.rows, res.row) {
			rs.rows = append(rs.rows, res.row)
		}
		if !slices.Contains(rs.trees, res.tree) {
			rs.trees = append(rs.trees, res.tree)
		}
	}
	return rs
}

// pooled returns the ratios subject/baseline of one tree in one row, paired
// by build and round, over all of the tree's builds.
func (rs runs) pooled(row, tree, subject, baseline string) []float64 {
	var ratios []float64
	for b, num := range rs.samples {
		if b.row != row || b.tree != tree || b.impl != subject {
			continue
		}
		den := rs.samples[build{row, tree, b.place, baseline}]
		for i := range min(len(num), len(den)) {
			ratios = append(ratios, num[i]/den[i])
		}
	}
	slices.Sort(ratios)
	return ratios
}

// report prints, per row, each tree's pooled ratio and, for two trees, the
// change and its p-value.
func (rs runs) report(w io.Writer, subject, baseline string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "row"
	for _, t := range rs.trees {
		header += "\t" + t + ": " + subject + "/" + baseline + " [quartiles] n"
	}
	if len(rs.trees) == 2 {
		header += "\tchange\tp"
	}
	fmt.Fprintln(tw, header)
	for _, row := range rs.rows {
		line := row
		var pools [][]float64
		for _, t := range rs.trees {
			p := rs.pooled(row, t, subject, baseline)
			pools = append(pools, p)
			if len(p) == 0 {
				line += "\t—"
				continue
			}
			line += fmt.Sprintf("\t%.3f× [%.3f–%.3f] %d",
				stat.Quantile(p, 0.5), stat.Quantile(p, 0.25), stat.Quantile(p, 0.75), len(p))
		}
		if len(pools) == 2 && len(pools[0]) > 0 && len(pools[1]) > 0 {
			change := stat.Quantile(pools[1], 0.5)/stat.Quantile(pools[0], 0.5) - 1
			line += fmt.Sprintf("\t%+.1f %%\t%.3f", 100*change, stat.MannWhitney(pools[0], pools[1]))
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

func main() {
	metric := flag.String("metric", "cpu-ns/op", "the unit compared")
	subject := flag.String("subject", "atomicsem", "the implementation measured")
	baseline := flag.String("baseline", "chan", "the implementation it is measured against")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: placements [-metric unit] [-subject impl] [-baseline impl] raw.txt")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	read(f, *metric).report(os.Stdout, *subject, *baseline)
}
