// Command stress runs a mixed workload against one atomicsem.Semaphore and
// checks the semaphore's invariants while it runs and whenever it is quiet.
//
//	go run ./stress                     # 20 s, FIFO mode
//	go run ./stress -barging -seed 42   # barging mode, decisions of seed 42
//	go run ./stress -credit -rate 2000  # the credit bucket workload (credit.go)
//
// Goroutines acquire (blocking, with cancellations and deadlines, and
// TryAcquire) permits of mixed weights, hold a few tokens each, and release
// or forget them; they also add permits with TryRelease. A controller moves
// the limit all the while, throttling it (down to zero, below what tokens
// hold) and unthrottling it (up to the maximum), in phases of a moving limit
// and of a limit held still, in random order but never more of the first.
// A few times during the run the workload pauses so that the semaphore can
// be checked at rest, and a checker parks a known queue of waiters and
// checks the order in which they are granted. A prober races cancellations
// against grants on a side semaphore. At the end the semaphore is closed
// under load.
//
// While it runs, the command shows progress on one line rewritten in place
// (plain periodic lines when the output is not a terminal). It ends with a
// report listing every invariant checked, with its result and numbers, and
// exits with status 1 if any was violated.
//
// The seed fixes every random decision of the workload (operations, weights,
// deadlines, limits, phase lengths), not the scheduler's interleaving, so a
// rerun with the same seed repeats the workload, not the exact execution.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	cfg := config{out: os.Stdout}
	flag.DurationVar(&cfg.duration, "duration", 20*time.Second, "how long the mixed workload runs")
	flag.IntVar(&cfg.goroutines, "goroutines", 64, "number of worker goroutines")
	flag.Int64Var(&cfg.max, "max", 16, "the semaphore's maximum (the ceiling of its limit)")
	flag.Uint64Var(&cfg.seed, "seed", 0, "seed for the workload's decisions; 0 picks one from the clock")
	flag.BoolVar(&cfg.barging, "barging", false, "build the semaphore WithBarging instead of FIFO")
	flag.BoolVar(&cfg.credit, "credit", false, "run the credit bucket workload instead")
	flag.Float64Var(&cfg.rate, "rate", 2000, "the credit workload's rate, in credits per second")
	flag.Int64Var(&cfg.burst, "burst", 256, "the credit workload's burst")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "stress: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "stress:", err)
		os.Exit(2)
	}
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	cfg.live = isTerminal(os.Stdout)
	if cfg.credit {
		if !runCredit(cfg) {
			os.Exit(1)
		}
		return
	}
	if !run(cfg).passed() {
		os.Exit(1)
	}
}

// isTerminal reports whether f is a character device, which is what a
// terminal is and a pipe or a file is not.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
