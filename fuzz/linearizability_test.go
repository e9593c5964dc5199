package fuzz_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/atomicsem/atomicsem/internal/model"
)

var (
	linSmall = flag.Int("lin.small", 1000, "small histories (3 clients × 4–8 operations) to check per mode")
	linLong  = flag.Bool("lin.long", false, "also check histories of 8 clients × 1000 operations")
	linSeed  = flag.Uint64("lin.seed", 0, "base seed of the histories (0: taken from the clock and logged)")
)

// TestLinearizableSmallHistories checks many short histories, where every
// interleaving the scheduler produces is cheap to check exhaustively.
func TestLinearizableSmallHistories(t *testing.T) {
	n := *linSmall
	if testing.Short() {
		n = min(n, 100)
	}
	forEachMode(t, func(t *testing.T, barging bool) {
		checkHistories(t, linConfig{barging: barging, clients: 3, minOps: 4, maxOps: 8}, n, 10*time.Second)
	})
}

// TestLinearizableLongHistories checks histories long enough for the
// semaphore to go through many states with waiters parked: limit changes
// under held tokens, debt, cancellations racing grants, starving mode.
func TestLinearizableLongHistories(t *testing.T) {
	n := 20
	if testing.Short() {
		n = 4
	}
	forEachMode(t, func(t *testing.T, barging bool) {
		checkHistories(t, linConfig{barging: barging, clients: 4, minOps: 100, maxOps: 100}, n, time.Minute)
	})
}

// TestLinearizableVeryLongHistories runs with -lin.long: five histories of
// 8 clients × 1000 operations per mode.
func TestLinearizableVeryLongHistories(t *testing.T) {
	if !*linLong {
		t.Skip("enable with -lin.long")
	}
	forEachMode(t, func(t *testing.T, barging bool) {
		checkHistories(t, linConfig{barging: barging, clients: 8, minOps: 1000, maxOps: 1000}, 5, 10*time.Minute)
	})
}

// forEachMode runs f as a subtest for each queueing mode.
func forEachMode(t *testing.T, f func(t *testing.T, barging bool)) {
	for _, barging := range []bool{false, true} {
		name := "mode=fifo"
		if barging {
			name = "mode=barging"
		}
		t.Run(name, func(t *testing.T) { f(t, barging) })
	}
}

// checkHistories records count histories with cfg, seeds base, base+1, …,
// and checks each with porcupine. A non-linearizable history fails the test
// with its seed and the path of porcupine's visualization of it; a check
// that runs past timeout is counted as inconclusive.
func checkHistories(t *testing.T, cfg linConfig, count int, timeout time.Duration) {
	base := *linSeed
	if base == 0 {
		base = uint64(time.Now().UnixNano())
	}
	t.Logf("base seed %d, hooks %t", base, hooksEnabled)
	var (
		ops, waitedOut, unknown int
		start                   = time.Now()
	)
	for i := range count {
		cfg.seed = base + uint64(i)
		restore := yieldAtHooks(cfg.seed)
		h := recordWithWatchdog(cfg)
		restore()
		if len(h.panics) > 0 {
			t.Fatalf("history with seed %d: %s; rerun with -run '%s$' -lin.seed=%d",
				cfg.seed, strings.Join(h.panics, "; "), t.Name(), cfg.seed)
		}
		annotate(h.ops)
		m := linModel(h.initial, h.max)
		res, info := porcupine.CheckOperationsVerbose(m, h.ops, timeout)
		switch res {
		case porcupine.Illegal:
			t.Fatalf("history with seed %d is not linearizable: New(%d, %d), %d clients, %d operations; "+
				"visualization: %s; rerun with -run '%s$' -lin.seed=%d, whose first history "+
				"has the same operations (the schedule may differ)",
				cfg.seed, h.initial, h.max, cfg.clients, len(h.ops), visualize(t, m, info, cfg.seed),
				t.Name(), cfg.seed)
		case porcupine.Unknown:
			unknown++
		}
		ops += len(h.ops)
		for _, op := range h.ops {
			in := op.Input.(linInput)
			if in.op == opAcquire && !in.ctxDone && op.Output.(linOutput).outcome == model.CtxDone {
				waitedOut++
			}
		}
	}
	t.Logf("%d histories, %d operations, %d acquires timed out while waiting, %d inconclusive; %v",
		count, ops, waitedOut, unknown, time.Since(start).Round(time.Millisecond))
}

// historyDeadline bounds the recording of one history. Every Acquire in a
// history has a timeout of at most a few milliseconds, so a history that
// takes longer than this has an operation stuck for good.
const historyDeadline = time.Minute

// recordWithWatchdog records a history and, if it does not finish within
// historyDeadline, prints every goroutine's stack and crashes the test
// binary with the seed: a stuck operation cannot be failed from the test's
// goroutine, which is waiting for it.
func recordWithWatchdog(cfg linConfig) linHistory {
	watchdog := time.AfterFunc(historyDeadline, func() {
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		panic(fmt.Sprintf("history with seed %d (barging %t) did not finish within %v; stacks above",
			cfg.seed, cfg.barging, historyDeadline))
	})
	defer watchdog.Stop()
	return recordHistory(cfg)
}

// visualize writes porcupine's visualization of a failed check to the
// directory named by LIN_VIZ_DIR, or to the system's temporary directory,
// where it outlives the test, and returns its path.
func visualize(t *testing.T, m porcupine.Model, info porcupine.LinearizationInfo, seed uint64) string {
	dir := os.Getenv("LIN_VIZ_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("atomicsem-lin-%d.html", seed))
	if err := porcupine.VisualizePath(m, info, path); err != nil {
		t.Logf("writing the visualization: %v", err)
		return "(none)"
	}
	return path
}
