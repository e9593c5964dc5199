// Command targets reads the raw output of the benchmark suite and prints,
// for each performance target of atomicsem, the medians it compares, their
// ratio, the target and whether the run meets it.
//
// Usage:
//
//	go run ./cmd/targets results.txt...
//
// Ratios come from medians of the same run, so that noise from other work on
// the machine, which moves every column of a run together, cancels out as
// far as it can. benchstat gives the spread of each median.
//
// Each ratio is also given paired: the median, and the quartiles, of the
// ratios taken sample by sample. bench/run.sh runs the suite one round at a
// time, so the i-th samples of two benchmarks come from the same round, a
// few seconds apart. On a machine whose speed shifts between regimes that
// last longer than that (see docs/benchmarks.md, Noise), the paired ratio
// compares the two within each regime, where the ratio of medians may set
// the median of one against that of the other taken in a different regime.
// Where the two verdicts differ, the met column gives both.
package main

import (
	"bufio"
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

// procsSuffix is the -GOMAXPROCS suffix that go test adds to names.
var procsSuffix = regexp.MustCompile(`-\d+$`)

// samples maps a benchmark name (without the suffix) and a unit to the
// values seen.
type samples map[string]map[string][]float64

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: targets results.txt...")
		os.Exit(2)
	}
	all := samples{}
	for _, path := range os.Args[1:] {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		all.read(f)
		f.Close()
	}
	all.report(os.Stdout)
}

// read adds every benchmark result line of r.
func (s samples) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := procsSuffix.ReplaceAllString(fields[0], "")
		// fields[1] is the iteration count; then value-unit pairs.
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				break
			}
			if s[name] == nil {
				s[name] = map[string][]float64{}
			}
			s[name][fields[i+1]] = append(s[name][fields[i+1]], v)
		}
	}
}

// median returns the median of name's values in unit, and whether there
// were any.
func (s samples) median(name, unit string) (float64, bool) {
	vs := slices.Clone(s[name][unit])
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	return stat.Quantile(vs, 0.5), true
}

// pairedRatios returns the lower quartile, the median and the upper quartile
// of num's samples in unit divided one by one by den's, the i-th by the i-th.
// It reports false unless both have the same number of samples, all of
// den's nonzero: only then do they pair up round by round.
func (s samples) pairedRatios(num, den, unit string) ([3]float64, bool) {
	ns, ds := s[num][unit], s[den][unit]
	if len(ns) == 0 || len(ns) != len(ds) {
		return [3]float64{}, false
	}
	ratios := make([]float64, len(ns))
	for i := range ns {
		if ds[i] == 0 {
			return [3]float64{}, false
		}
		ratios[i] = ns[i] / ds[i]
	}
	slices.Sort(ratios)
	return [3]float64{stat.Quantile(ratios, 0.25), stat.Quantile(ratios, 0.5), stat.Quantile(ratios, 0.75)}, true
}

// target is one line of the report: num/den in unit must not exceed max.
// With den empty, the median of num itself is compared with max. A line
// whose what starts with "info: " has no target; its ratio explains another.
type target struct {
	what     string
	num, den string
	unit     string
	max      float64
}

var targets = []target{
	{"serial Acquire+Release vs floor", "Uncontended/impl=atomicsem/op=acquire", "Uncontended/impl=floor/op=acquire", "ns/op", 1.3},
	{"serial Acquire+Release vs xsync", "Uncontended/impl=atomicsem/op=acquire", "Uncontended/impl=xsync/op=acquire", "ns/op", 0.6},
	{"serial TryAcquire+Release vs floor", "Uncontended/impl=atomicsem/op=tryacquire", "Uncontended/impl=floor/op=tryacquire", "ns/op", 1.2},
	{"direct Acquire+Release vs floor", "Direct/impl=atomicsem/op=acquire", "Direct/impl=floor/op=acquire", "ns/op", 1.3},
	{"direct Acquire+Release vs xsync", "Direct/impl=atomicsem/op=acquire", "Direct/impl=xsync/op=acquire", "ns/op", 0.6},
	{"direct TryAcquire+Release vs floor", "Direct/impl=atomicsem/op=tryacquire", "Direct/impl=floor/op=tryacquire", "ns/op", 1.2},
	{"parallel, no parking, vs floor", "Parallel/impl=atomicsem", "Parallel/impl=floor", "ns/op", 1.3},
	{"info: serial Acquire+Release vs floorcas", "Uncontended/impl=atomicsem/op=acquire", "Uncontended/impl=floorcas/op=acquire", "ns/op", 0},
	{"info: serial TryAcquire+Release vs floorcas", "Uncontended/impl=atomicsem/op=tryacquire", "Uncontended/impl=floorcas/op=tryacquire", "ns/op", 0},
	{"info: floorcas serial Acquire+Release vs floor", "Uncontended/impl=floorcas/op=acquire", "Uncontended/impl=floor/op=acquire", "ns/op", 0},
	{"info: floorcas serial TryAcquire+Release vs floor", "Uncontended/impl=floorcas/op=tryacquire", "Uncontended/impl=floor/op=tryacquire", "ns/op", 0},
	{"info: floorcas serial Acquire+Release vs xsync", "Uncontended/impl=floorcas/op=acquire", "Uncontended/impl=xsync/op=acquire", "ns/op", 0},
	{"info: tokencas serial TryAcquire+Release vs floorcas", "Uncontended/impl=tokencas/op=tryacquire", "Uncontended/impl=floorcas/op=tryacquire", "ns/op", 0},
	{"info: serial TryAcquire+Release vs tokencas", "Uncontended/impl=atomicsem/op=tryacquire", "Uncontended/impl=tokencas/op=tryacquire", "ns/op", 0},
	{"info: direct tokencas TryAcquire+Release vs floorcas", "Direct/impl=tokencas/op=tryacquire", "Direct/impl=floorcas/op=tryacquire", "ns/op", 0},
	{"info: parallel vs floorcas", "Parallel/impl=atomicsem", "Parallel/impl=floorcas", "ns/op", 0},
	{"info: tokencas serial Acquire+Release vs floor", "Uncontended/impl=tokencas/op=acquire", "Uncontended/impl=floor/op=acquire", "ns/op", 0},
	{"info: tokencas serial Acquire+Release vs xsync", "Uncontended/impl=tokencas/op=acquire", "Uncontended/impl=xsync/op=acquire", "ns/op", 0},
	{"info: serial Acquire+Release vs tokencas", "Uncontended/impl=atomicsem/op=acquire", "Uncontended/impl=tokencas/op=acquire", "ns/op", 0},
	{"info: wordcas serial Acquire+Release vs xsync", "Uncontended/impl=wordcas/op=acquire", "Uncontended/impl=xsync/op=acquire", "ns/op", 0},
	{"info: serial Acquire+Release vs wordcas", "Uncontended/impl=atomicsem/op=acquire", "Uncontended/impl=wordcas/op=acquire", "ns/op", 0},
	{"info: direct tokencas Acquire+Release vs xsync", "Direct/impl=tokencas/op=acquire", "Direct/impl=xsync/op=acquire", "ns/op", 0},
	{"info: direct wordcas Acquire+Release vs xsync", "Direct/impl=wordcas/op=acquire", "Direct/impl=xsync/op=acquire", "ns/op", 0},
	{"info: tokencas parallel vs floor", "Parallel/impl=tokencas", "Parallel/impl=floor", "ns/op", 0},
	{"info: wordcas parallel vs floor", "Parallel/impl=wordcas", "Parallel/impl=floor", "ns/op", 0},
	{"info: parallel vs tokencas", "Parallel/impl=atomicsem", "Parallel/impl=tokencas", "ns/op", 0},
	{"info: parallel vs wordcas", "Parallel/impl=atomicsem", "Parallel/impl=wordcas", "ns/op", 0},
	{"info: serial Acquire+Release vs floorguard", "Uncontended/impl=atomicsem/op=acquire", "Uncontended/impl=floorguard/op=acquire", "ns/op", 0},
	{"info: serial TryAcquire+Release vs floorguard", "Uncontended/impl=atomicsem/op=tryacquire", "Uncontended/impl=floorguard/op=tryacquire", "ns/op", 0},
	{"info: direct Acquire+Release vs floorguard", "Direct/impl=atomicsem/op=acquire", "Direct/impl=floorguard/op=acquire", "ns/op", 0},
	{"info: parallel vs floorguard", "Parallel/impl=atomicsem", "Parallel/impl=floorguard", "ns/op", 0},
	{"contended FIFO limit=1 vs xsync", "Contended/impl=atomicsem/limit=1", "Contended/impl=xsync/limit=1", "ns/op", 0.5},
	{"contended FIFO limit=1 vs chan", "Contended/impl=atomicsem/limit=1", "Contended/impl=chan/limit=1", "ns/op", 1.0},
	{"contended FIFO limit=1 allocs", "Contended/impl=atomicsem/limit=1", "", "allocs/op", 0},
	{"contended FIFO limit=4 vs xsync", "Contended/impl=atomicsem/limit=4", "Contended/impl=xsync/limit=4", "ns/op", 0.5},
	{"contended FIFO limit=4 vs chan", "Contended/impl=atomicsem/limit=4", "Contended/impl=chan/limit=4", "ns/op", 1.0},
	{"contended FIFO limit=4 allocs", "Contended/impl=atomicsem/limit=4", "", "allocs/op", 0},
	{"info: contended FIFO limit=1 vs floorpark", "Contended/impl=atomicsem/limit=1", "Contended/impl=floorpark/limit=1", "ns/op", 0},
	{"info: contended FIFO limit=4 vs floorpark", "Contended/impl=atomicsem/limit=4", "Contended/impl=floorpark/limit=4", "ns/op", 0},
	{"info: weighted FIFO vs floorpark", "Weighted/impl=atomicsem/limit=16", "Weighted/impl=floorpark/limit=16", "ns/op", 0},
	{"info: contended FIFO limit=1 vs floorparkguard", "Contended/impl=atomicsem/limit=1", "Contended/impl=floorparkguard/limit=1", "ns/op", 0},
	{"info: contended FIFO limit=4 vs floorparkguard", "Contended/impl=atomicsem/limit=4", "Contended/impl=floorparkguard/limit=4", "ns/op", 0},
	{"info: contended FIFO limit=1 vs floorparkword", "Contended/impl=atomicsem/limit=1", "Contended/impl=floorparkword/limit=1", "ns/op", 0},
	{"info: contended FIFO limit=4 vs floorparkword", "Contended/impl=atomicsem/limit=4", "Contended/impl=floorparkword/limit=4", "ns/op", 0},
	{"info: floorparkword contended limit=1 vs chan", "Contended/impl=floorparkword/limit=1", "Contended/impl=chan/limit=1", "ns/op", 0},
	{"info: floorparkword contended limit=4 vs chan", "Contended/impl=floorparkword/limit=4", "Contended/impl=chan/limit=4", "ns/op", 0},
	{"info: floorparkword contended limit=1 vs floorparkguard", "Contended/impl=floorparkword/limit=1", "Contended/impl=floorparkguard/limit=1", "ns/op", 0},
	{"info: floorparkword contended limit=4 vs floorparkguard", "Contended/impl=floorparkword/limit=4", "Contended/impl=floorparkguard/limit=4", "ns/op", 0},
	{"info: floorparkguard contended limit=1 vs xsync", "Contended/impl=floorparkguard/limit=1", "Contended/impl=xsync/limit=1", "ns/op", 0},
	{"info: floorparkguard contended limit=1 vs chan", "Contended/impl=floorparkguard/limit=1", "Contended/impl=chan/limit=1", "ns/op", 0},
	{"info: floorpark contended limit=1 vs xsync", "Contended/impl=floorpark/limit=1", "Contended/impl=xsync/limit=1", "ns/op", 0},
	{"info: floorpark contended limit=1 vs chan", "Contended/impl=floorpark/limit=1", "Contended/impl=chan/limit=1", "ns/op", 0},
	{"info: floorpark contended limit=4 vs xsync", "Contended/impl=floorpark/limit=4", "Contended/impl=xsync/limit=4", "ns/op", 0},
	{"info: floorpark contended limit=4 vs chan", "Contended/impl=floorpark/limit=4", "Contended/impl=chan/limit=4", "ns/op", 0},
	{"info: floorpark weighted vs xsync", "Weighted/impl=floorpark/limit=16", "Weighted/impl=xsync/limit=16", "ns/op", 0},
	{"info: floorpark weighted vs chan", "Weighted/impl=floorpark/limit=16", "Weighted/impl=chan/limit=16", "ns/op", 0},
	{"contended barging limit=1 vs syncmutex", "Contended/impl=atomicsem-barging/limit=1", "Contended/impl=syncmutex/limit=1", "ns/op", 2.0},
	{"queue 10000 vs 0, FIFO TryAcquire", "QueueLen/impl=atomicsem/op=tryacquire/parked=10000", "QueueLen/impl=atomicsem/op=tryacquire/parked=0", "ns/op", 1.2},
	{"queue 10000 vs 0, FIFO Acquire", "QueueLen/impl=atomicsem/op=acquire/parked=10000", "QueueLen/impl=atomicsem/op=acquire/parked=0", "ns/op", 1.2},
	{"queue 10000 vs 0, barging TryAcquire", "QueueLen/impl=atomicsem-barging/op=tryacquire/parked=10000", "QueueLen/impl=atomicsem-barging/op=tryacquire/parked=0", "ns/op", 1.2},
	{"queue 10000 vs 0, barging Acquire", "QueueLen/impl=atomicsem-barging/op=acquire/parked=10000", "QueueLen/impl=atomicsem-barging/op=acquire/parked=0", "ns/op", 1.2},
	{"parked waiter beyond its goroutine", "ParkedMemory/impl=atomicsem", "", "B/waiter-net", 64},
	{"cancel allocs beyond the ctx's", "Cancel/impl=atomicsem", "Cancel/impl=ctxonly", "allocs/op", 1.0},
	{"cancel bytes beyond the ctx's", "Cancel/impl=atomicsem", "Cancel/impl=ctxonly", "B/op", 1.0},
}

// report prints one line per target that the results cover. A target in
// ns/op is also shown in cpu-ns/op, where the suite reports it: the ratio of
// CPU time is the one that noise from other work on the machine moves less.
func (s samples) report(w io.Writer) {
	var lines []target
	for _, t := range targets {
		lines = append(lines, t)
		if t.unit == "ns/op" {
			t.what += " (cpu)"
			t.unit = "cpu-ns/op"
			lines = append(lines, t)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tsubject\tbaseline\tratio\tpaired [quartiles]\twant\tmet")
	for _, t := range lines {
		num, ok := s.median("Benchmark"+t.num, t.unit)
		if !ok {
			continue
		}
		if t.den == "" {
			fmt.Fprintf(tw, "%s\t%.4g %s\t\t\t\t≤ %g\t%s\n", t.what, num, t.unit, t.max, yes(num <= t.max))
			continue
		}
		den, ok := s.median("Benchmark"+t.den, t.unit)
		if !ok {
			continue
		}
		if den == 0 {
			fmt.Fprintf(tw, "%s\t%.4g %s\t%.4g %s\t\t\t≤ %g×\t%s\n", t.what, num, t.unit, den, t.unit, t.max, yes(num == 0))
			continue
		}
		ratio := num / den
		met := yes(ratio <= t.max)
		paired := "—" // the samples do not pair up
		if q, ok := s.pairedRatios("Benchmark"+t.num, "Benchmark"+t.den, t.unit); ok {
			paired = fmt.Sprintf("%.2f× [%.2f–%.2f]", q[1], q[0], q[2])
			if pairedMet := yes(q[1] <= t.max); pairedMet != met {
				met += " (paired: " + pairedMet + ")"
			}
		}
		if strings.HasPrefix(t.what, "info: ") {
			// No target: the ratio explains another line.
			fmt.Fprintf(tw, "%s\t%.4g %s\t%.4g %s\t%.2f×\t%s\t\t\n", t.what, num, t.unit, den, t.unit, ratio, paired)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.4g %s\t%.4g %s\t%.2f×\t%s\t≤ %g×\t%s\n", t.what, num, t.unit, den, t.unit, ratio, paired, t.max, met)
	}
	tw.Flush()
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}
