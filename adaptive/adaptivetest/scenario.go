package adaptivetest

import (
	"fmt"
	"time"
)

// Scenario is a failure of the service, simulated, with the criterion a
// limiter passes it by. Scenarios returns the standard ones; Run runs one
// against a limiter.
type Scenario struct {
	// Name is a short name, for tables and test names.
	Name string
	// Criterion says, in words, what a limiter must do to pass.
	Criterion string
	// The limiter's bounds and initial limit.
	Min, Max, Initial int
	// Config is the simulation.
	Config Config
	// judge returns the figures that decide the scenario, and whether
	// they pass; without is the run of Config with no client cancelling
	// (nil unless the scenario has cancels).
	judge func(s Scenario, res, without []PhaseResult) (string, bool)
}

// Verdict is what a Scenario's run showed.
type Verdict struct {
	Pass bool
	// Figures are the measurements the criterion is judged on, in words.
	Figures string
	// Phases are the run's results.
	Phases []PhaseResult
}

// Run runs the scenario against a fresh limiter from newLimiter (twice for
// a scenario that compares with a run without cancelling clients) and
// judges it. Like Run, it belongs inside a testing/synctest bubble.
func (s Scenario) Run(newLimiter func(min, max, initial int) Limiter) Verdict {
	res := Run(newLimiter(s.Min, s.Max, s.Initial), s.Config)
	var without []PhaseResult
	cancels := false
	for _, ph := range s.Config.Phases {
		cancels = cancels || ph.Cancel > 0
	}
	if cancels {
		cfg := s.Config
		cfg.Phases = append([]Phase(nil), cfg.Phases...)
		for i := range cfg.Phases {
			cfg.Phases[i].Cancel = 0
		}
		without = Run(newLimiter(s.Min, s.Max, s.Initial), cfg)
	}
	figures, pass := s.judge(s, res, without)
	return Verdict{Pass: pass, Figures: figures, Phases: res}
}

// Scenarios returns the standard failure scenarios. Unless a scenario says
// otherwise, the service is the one of Evaluate (Capacity workers, an
// unloaded latency of ServiceTime, a deadline of 5 × ServiceTime, offered
// twice what it completes) and the limiter is bounded to [MinLimit,
// MaxLimit], starting at Capacity, healthy for a first phase of
// PhaseLength.
func Scenarios() []Scenario {
	healthy := func(d time.Duration) Phase { return Phase{Duration: d, Capacity: Capacity, Offered: Offered} }
	std := func(name, criterion string, judge func(Scenario, []PhaseResult, []PhaseResult) (string, bool), phases ...Phase) Scenario {
		return Scenario{Name: name, Criterion: criterion, Min: MinLimit, Max: MaxLimit, Initial: Capacity,
			Config: Config{ServiceTime: ServiceTime, Phases: phases}, judge: judge}
	}
	failure := func(f Fault) func(Scenario, []PhaseResult, []PhaseResult) (string, bool) {
		return func(s Scenario, res, _ []PhaseResult) (string, bool) {
			atMin := reach(res[1].Trace, func(l int) bool { return l <= s.Min })
			back := res[2].SettleTime
			return fmt.Sprintf("at the minimum after %s; back within ±25 %% after %s", since(atMin), since(back)),
				atMin >= 0 && atMin <= time.Second && back >= 0 && back <= 5*time.Second
		}
	}
	return []Scenario{
		std("total failure",
			"every request fails with a 503 in 1 ms for 10 s: the limit is at its minimum within 1 s; back within ±25 % of capacity within 5 s of the recovery",
			failure(FailFast),
			healthy(PhaseLength), Phase{Duration: 10 * time.Second, Capacity: Capacity, Offered: Offered, Fault: FailFast}, healthy(6*time.Second)),
		std("hang",
			"every request hangs until the server's 100 ms deadline for 10 s: the limit is at its minimum within 1 s; back within ±25 % of capacity within 5 s of the recovery",
			failure(Hang),
			healthy(PhaseLength), Phase{Duration: 10 * time.Second, Capacity: Capacity, Offered: Offered, Fault: Hang}, healthy(6*time.Second)),
		{
			Name:      "RTT at clock resolution",
			Criterion: "every request takes no measurable time, nothing queues: the limit never falls, and grows to its maximum",
			Min:       MinLimit, Max: MaxLimit, Initial: Capacity,
			Config: Config{ServiceTime: ServiceTime, Tick: 10 * time.Millisecond, Phases: []Phase{
				{Duration: 3 * time.Second, Capacity: MaxLimit, Offered: 1, Fault: Instant},
			}},
			judge: func(s Scenario, res, _ []PhaseResult) (string, bool) {
				r := res[0]
				return fmt.Sprintf("lowest %d (from %d), at the end %d", r.Low, s.Initial, r.Last),
					r.Low >= s.Initial && r.Last == s.Max
			},
		},
		std("latency spike",
			"the latency is ×10 for 2 s: the limit falls during the spike; goodput ≥ 0.9 of capacity from 2 s after it",
			func(s Scenario, res, _ []PhaseResult) (string, bool) {
				before := res[0].Last
				return fmt.Sprintf("limit %d before, lowest %d during; goodput %.2f from 2 s after", before, res[1].Low, res[2].Goodput),
					res[1].Low < before && res[2].Goodput >= 0.9
			},
			healthy(PhaseLength), Phase{Duration: 2 * time.Second, Capacity: Capacity, Offered: Offered, Latency: 10}, healthy(4*time.Second)),
		{
			Name:      "bimodal latency",
			Criterion: "90 % of requests take 50 µs, 10 % 20 ms: the limit settles within ±25 % of capacity, within the first half of the run, and stays there",
			Min:       MinLimit, Max: MaxLimit, Initial: Capacity,
			Config: Config{ServiceTime: 50 * time.Microsecond, Timeout: 5 * ServiceTime, Tick: 50 * time.Microsecond, Phases: []Phase{
				{Duration: PhaseLength, Capacity: Capacity, Offered: Offered, Slow: 0.1, SlowTime: ServiceTime},
			}},
			judge: func(s Scenario, res, _ []PhaseResult) (string, bool) {
				r := res[0]
				return fmt.Sprintf("settled after %s; %d–%d over the second half", since(r.SettleTime), r.MinLimit, r.MaxLimit),
					r.SettleTime >= 0 && r.SettleTime <= r.Duration/2
			},
		},
		std("client-cancel storm",
			"half the clients give up after 5 ms: the limit stays within ±10 % of where it is without them",
			func(s Scenario, res, without []PhaseResult) (string, bool) {
				with, wo := res[0].MeanLimit, without[0].MeanLimit
				return fmt.Sprintf("mean %.0f, against %.0f without them", with, wo),
					with >= 0.9*wo && with <= 1.1*wo
			},
			Phase{Duration: 2 * PhaseLength, Capacity: Capacity, Offered: Offered, Cancel: 0.5, CancelAfter: 5 * time.Millisecond}),
		{
			Name:      "slow start",
			Criterion: "from a limit of 1 and a capacity of 500: within ±25 % of capacity within 5 s",
			Min:       1, Max: MaxLimit, Initial: 1,
			Config: Config{ServiceTime: ServiceTime, Phases: []Phase{
				{Duration: 8 * time.Second, Capacity: 500, Offered: Offered},
			}},
			judge: func(s Scenario, res, _ []PhaseResult) (string, bool) {
				r := res[0]
				return fmt.Sprintf("within ±25 %% after %s", since(r.SettleTime)), r.SettleTime >= 0 && r.SettleTime <= 5*time.Second
			},
		},
	}
}

// reach returns the time of the first point of trace at which ok holds,
// or -1 if none does.
func reach(trace []int, ok func(int) bool) time.Duration {
	for i, l := range trace {
		if ok(l) {
			return time.Duration(i) * TraceEvery
		}
	}
	return -1
}

// since formats a time from the start of a phase, or "never" for -1.
func since(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
