package adaptivetest

import (
	"fmt"
	"time"
)

// The standard workload of Evaluate: a service of Capacity workers with an
// unloaded latency of ServiceTime, offered twice what it can complete, and
// a limiter bounded to [MinLimit, MaxLimit].
const (
	Capacity    = 100
	ServiceTime = 20 * time.Millisecond
	Offered     = 2.0
	MinLimit    = 1
	MaxLimit    = 1000
	// PhaseLength is the length of each phase of Evaluate's runs, unless
	// told otherwise.
	PhaseLength = 4 * time.Second
)

// Report is what Evaluate measured of a limiter.
type Report struct {
	// Samples to settle (see PhaseResult.Settle) within ±25 % of the
	// capacity: from a limit of MinLimit, from MaxLimit, after the capacity
	// halves, after it doubles again. -1 means not settled by the end of
	// the phase.
	FromBelow, FromAbove, Halved, Doubled int
	// Goodput is the lowest completion rate, as a fraction of the
	// capacity, and P99 the highest 99th-percentile latency, of the second
	// halves of all the phases.
	Goodput float64
	P99     time.Duration
	// Runs holds each run's phases: "below", "above" and "follow".
	Runs map[string][]PhaseResult
}

// P99Ratio returns P99 as a multiple of the unloaded latency.
func (r Report) P99Ratio() float64 { return float64(r.P99) / float64(ServiceTime) }

// String formats the report as one line.
func (r Report) String() string {
	return fmt.Sprintf("settle from below %s, from above %s, after halving %s, after doubling %s; goodput ≥ %.2f, p99 ≤ %.2f× unloaded",
		settle(r.FromBelow), settle(r.FromAbove), settle(r.Halved), settle(r.Doubled), r.Goodput, r.P99Ratio())
}

func settle(n int) string {
	if n < 0 {
		return "never"
	}
	return fmt.Sprint(n)
}

// Evaluate runs the standard workload against limiters made by
// newLimiter, which returns a fresh limiter with the given bounds and
// initial limit for each of three runs:
//
//   - "below": starting at MinLimit, one phase at Capacity;
//   - "above": starting at MaxLimit, one phase at Capacity;
//   - "follow": starting at Capacity, a phase at Capacity, one at half of
//     it, one at Capacity again.
//
// Every phase is offered twice its capacity and lasts phaseLength, or
// PhaseLength if that is 0. Like Run, Evaluate belongs inside a
// testing/synctest bubble.
func Evaluate(newLimiter func(min, max, initial int) Limiter, phaseLength time.Duration) Report {
	if phaseLength == 0 {
		phaseLength = PhaseLength
	}
	phase := func(c int) Phase { return Phase{Duration: phaseLength, Capacity: c, Offered: Offered} }
	cfg := func(ps ...Phase) Config { return Config{ServiceTime: ServiceTime, Phases: ps} }
	r := Report{Goodput: 1e9, Runs: map[string][]PhaseResult{}}
	r.Runs["below"] = Run(newLimiter(MinLimit, MaxLimit, MinLimit), cfg(phase(Capacity)))
	r.Runs["above"] = Run(newLimiter(MinLimit, MaxLimit, MaxLimit), cfg(phase(Capacity)))
	r.Runs["follow"] = Run(newLimiter(MinLimit, MaxLimit, Capacity),
		cfg(phase(Capacity), phase(Capacity/2), phase(Capacity)))
	r.FromBelow = r.Runs["below"][0].Settle
	r.FromAbove = r.Runs["above"][0].Settle
	r.Halved = r.Runs["follow"][1].Settle
	r.Doubled = r.Runs["follow"][2].Settle
	for _, run := range r.Runs {
		for _, ph := range run {
			r.Goodput = min(r.Goodput, ph.Goodput)
			r.P99 = max(r.P99, ph.P99)
		}
	}
	return r
}
