package leasesim_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/rediscredit"
)

var long = flag.Bool("leasesim.long", false, "simulate 1,000 processes for 10 s a phase, rather than 100 for 2 s")

// phase is one stretch of the simulation: each process's demand, in
// credits per second.
type phase struct {
	name   string
	demand func(i, n int, rate float64) float64
}

// The phases: demand under the rate, spread evenly; twice the rate, with
// half the processes hot; the same with the halves swapped; and half the
// processes gone quiet while the other half wants twice the rate.
var phases = []phase{
	{"steady: all at 0.8 of an even share", func(i, n int, r float64) float64 { return 0.8 * r / float64(n) }},
	{"overload: half at 4 shares, half at 0.4", func(i, n int, r float64) float64 {
		if i < n/2 {
			return 4 * r / float64(n)
		}
		return 0.4 * r / float64(n)
	}},
	{"shift: the halves swap", func(i, n int, r float64) float64 {
		if i >= n/2 {
			return 4 * r / float64(n)
		}
		return 0.4 * r / float64(n)
	}},
	{"quiet: half stop, half at 4 shares", func(i, n int, r float64) float64 {
		if i < n/2 {
			return 0
		}
		return 4 * r / float64(n)
	}},
}

// simConfig is one run of the simulation.
type simConfig struct {
	procs    int
	rate     float64       // the fleet's rate
	burst    int64         // the bucket's burst
	interval time.Duration // each lease's interval
	phase    time.Duration // each phase's length
	rtt      time.Duration // a round trip to the backend
	hold     time.Duration
}

// TestSimulation runs a fleet of processes, each spending one key's
// credit through a Lease of its own, against the model of Redis, on the
// fake clock, and reports per phase: the backend's calls per second, the
// share of the rate spent, the worst and best ratio of a process's spend
// to its max-min fair share (over the phase less its first second, and
// over its first second), how long a process that went quiet kept credit,
// and the law, checked on every spend.
func TestSimulation(t *testing.T) {
	cfg := simConfig{procs: 100, rate: 100_000, burst: 100_000, phase: 2 * time.Second, rtt: time.Millisecond, hold: time.Minute}
	if *long {
		cfg.procs, cfg.phase = 1000, 10*time.Second
	}
	for _, interval := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond} {
		cfg.interval = interval
		t.Run(fmt.Sprintf("procs=%d/interval=%v", cfg.procs, interval), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { simulate(t, cfg) })
		})
	}
}

// tick is how often a simulated process spends what its demand has
// accrued.
const tick = 10 * time.Millisecond

func simulate(t *testing.T, cfg simConfig) {
	b := newBackend(cfg.rtt)
	ctx := context.Background()
	const key = "shared"
	n := cfg.procs
	leases := make([]*rediscredit.Lease, n)
	for i := range n {
		l, err := rediscredit.New(b, cfg.rate, cfg.burst, rediscredit.WithHold(cfg.hold))
		require.NoError(t, err)
		leases[i], err = l.Lease(key, rediscredit.WithLeaseInterval(cfg.interval))
		require.NoError(t, err)
	}
	start := time.Now()
	total := time.Duration(len(phases)) * cfg.phase
	// spent[i][s] is what process i spent in second s; perMs the fleet's
	// spends in each millisecond, for the law.
	secs := int(total / time.Second)
	spent := make([][]int64, n)
	for i := range spent {
		spent[i] = make([]int64, secs+1)
	}
	perMs := make([]int64, int(total/time.Millisecond)+1)
	var mu sync.Mutex
	quietSince := start.Add(3 * cfg.phase)
	kept := make([]time.Duration, n) // how long a process that went quiet held credit after its last spend
	var wg sync.WaitGroup
	// Each process ticks at a phase of its own, as processes of a fleet
	// do: on a fake clock, processes that tick at the same instants would
	// reach the backend in the same order every time.
	phaseOf := rand.New(rand.NewPCG(7, 7))
	for i := range n {
		offset := time.Duration(phaseOf.Int64N(int64(tick)))
		wg.Go(func() {
			time.Sleep(offset)
			owed := 0.0
			var lastSpend time.Time
			for now := time.Now(); now.Sub(start) < total; now = time.Now() {
				p := phases[int(now.Sub(start)/cfg.phase)]
				owed += p.demand(i, n, cfg.rate) * tick.Seconds()
				// Each credit owed is a request, which asks the lease once;
				// a request refused is dropped.
				var got int64
				for ; owed >= 1; owed-- {
					ok, err := leases[i].TrySpend(ctx, 1)
					require.NoError(t, err)
					if ok {
						got++
					}
				}
				if got > 0 {
					lastSpend = now
					el := now.Sub(start)
					mu.Lock()
					spent[i][int(el/time.Second)] += got
					perMs[int(el/time.Millisecond)] += got
					mu.Unlock()
				}
				if i < n/2 && !now.Before(quietSince) && leases[i].Stats().Balance > 0 {
					// Held with nothing spent since: from the later of the
					// phase's start and the process's last spend.
					kept[i] = now.Sub(later(quietSince, lastSpend)) + tick
				}
				time.Sleep(tick)
			}
		})
	}
	// The phases' call counts are read after wg.Wait, which orders their
	// writes before it: the bubble's clock alone does not.
	calls := make([]int64, len(phases))
	wg.Go(func() {
		for k := range phases {
			time.Sleep(cfg.phase)
			calls[k] = b.calls.Load()
		}
	})
	wg.Wait()
	time.Sleep(time.Millisecond)
	for _, le := range leases {
		require.NoError(t, le.Close(ctx))
	}

	t.Logf("%d processes, rate %.0f/s, burst %d, interval %v, round trip %v, %v a phase:", n, cfg.rate, cfg.burst, cfg.interval, cfg.rtt, cfg.phase)
	t.Logf("%-42s %12s %10s %22s %22s", "phase", "calls/s", "spent/rate", "worst/best of fair", "first second")
	prev := int64(0)
	for k, p := range phases {
		from, to := int(time.Duration(k)*cfg.phase/time.Second), int(time.Duration(k+1)*cfg.phase/time.Second)
		ratios := func(a, z int) (float64, float64, float64) {
			demands := make([]float64, n)
			for i := range n {
				demands[i] = p.demand(i, n, cfg.rate)
			}
			fair := maxMin(cfg.rate, demands)
			lo, hi, sum := math.Inf(1), 0.0, 0.0
			for i := range n {
				var got int64
				for s := a; s < z; s++ {
					got += spent[i][s]
				}
				sum += float64(got)
				if fair[i] > 0 {
					r := float64(got) / (fair[i] * float64(z-a))
					lo, hi = min(lo, r), max(hi, r)
				}
			}
			return lo, hi, sum / (cfg.rate * float64(z-a))
		}
		lo, hi, share := ratios(from+1, to)
		lo1, hi1, _ := ratios(from, from+1)
		perSec := float64(calls[k]-prev) / cfg.phase.Seconds()
		prev = calls[k]
		t.Logf("%-42s %12.0f %10.3f %10.2f / %-9.2f %10.2f / %-9.2f", p.name, perSec, share, lo, hi, lo1, hi1)
	}
	t.Logf("a process that went quiet kept credit for at most %v after its last spend (interval %v; the bound: 1.375 intervals and a round trip)", slices.Max(kept).Round(time.Millisecond), cfg.interval)
	excess := lawExcess(cfg.rate, cfg.burst, perMs)
	t.Logf("the law, on every millisecond's spends: the largest window holds %d credits over burst + rate·w (must be ≤ 0)", excess)
	require.LessOrEqual(t, excess, int64(0))
	require.LessOrEqual(t, slices.Max(kept), cfg.interval*11/8+cfg.rtt+tick)
}

// maxMin returns each demand's max-min fair share of capacity.
func maxMin(capacity float64, demands []float64) []float64 {
	out := make([]float64, len(demands))
	left, open := capacity, len(demands)
	done := make([]bool, len(demands))
	for open > 0 {
		level := left / float64(open)
		progress := false
		for i, d := range demands {
			if !done[i] && d <= level {
				out[i], done[i] = d, true
				left -= d
				open--
				progress = true
			}
		}
		if !progress {
			for i := range demands {
				if !done[i] {
					out[i], done[i] = level, true
				}
			}
			open = 0
		}
	}
	return out
}

// lawExcess returns the most by which any window of whole milliseconds
// [a, b] holds more spends than burst + ⌊rate·(b−a+1 ms)⌋: one pass over
// the prefix sums, S(b) − rate·b against the least S(a) − rate·a before
// it. A spend counted in a millisecond may have been made anywhere in it,
// so the window is taken a millisecond wide at least, which errs on the
// generous side by at most that millisecond's accrual.
func lawExcess(rate float64, burst int64, perMs []int64) int64 {
	var sum int64
	least := 0.0 // min over a of S(a−1) − rate·a
	worst := math.Inf(-1)
	for b, c := range perMs {
		// S(a−1) − rate·a at a = b, before adding b's spends.
		least = math.Min(least, float64(sum)-rate*float64(b)/1000)
		sum += c
		w := float64(sum) - rate*float64(b+1)/1000 - least
		worst = math.Max(worst, w)
	}
	return int64(math.Ceil(worst - float64(burst)))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
