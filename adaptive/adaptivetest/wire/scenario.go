package wire

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/atomicsem/atomicsem/adaptive"
)

// Scenario is a failure of a backend, or a load, run in real time over the
// loopback interface, with the criterion a limiter passes it by. The
// criterion compares the limiter with a fixed limit, Reference, run at the
// same time through the same Stack against a Backend of its own, with the
// same arrivals: both see the same machine, so a ratio of their figures
// holds on a loaded machine where neither figure alone would.
type Scenario struct {
	// Name is a short name, for tables and test names.
	Name string
	// Criterion says, in words, what a limiter must do to pass.
	Criterion string
	// The backend: Workers workers taking ServiceTime per request, and
	// answering Overloaded a request that waits QueueTimeout for one.
	Workers      int
	ServiceTime  time.Duration
	QueueTimeout time.Duration
	// Timeout is how long a client waits for an answer, unless its phase
	// gives it a shorter deadline or makes it cancel.
	Timeout time.Duration
	// The limiter's bounds and initial limit.
	Min, Max, Initial int
	// Reference is the fixed limit the limiter is compared with.
	Reference int
	Phases    []Phase
	// judge returns the checks the scenario is decided by.
	judge func(s Scenario, sub, ref *lane) []Check
}

// Check is one measurement a scenario is decided by, with its bound.
type Check struct {
	// What says what is measured.
	What string
	// Got is the measurement, Bound what it must reach: at least Bound
	// if AtLeast, else at most Bound.
	Got, Bound float64
	AtLeast    bool
}

// Pass reports whether the check holds.
func (c Check) Pass() bool {
	if c.AtLeast {
		return c.Got >= c.Bound
	}
	return c.Got <= c.Bound
}

// String formats the check as "what got (≥ bound)".
func (c Check) String() string {
	op := "≤"
	if c.AtLeast {
		op = "≥"
	}
	mark := ""
	if !c.Pass() {
		mark = " MISSED"
	}
	return fmt.Sprintf("%s %s (%s %s)%s", c.What, number(c.Got), op, number(c.Bound), mark)
}

func number(v float64) string {
	switch {
	case math.IsInf(v, 0) || math.IsNaN(v):
		return fmt.Sprint(v)
	case v == math.Trunc(v) && math.Abs(v) >= 10:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// Verdict is what a Scenario's run showed.
type Verdict struct {
	Scenario, Stack string
	Pass            bool
	Checks          []Check
	// Valid reports whether the machine served both limiters' clients:
	// whether, in every phase in which no client gives up by design and
	// the backend answers every request before its clients' timeout, at
	// most one request in a hundred of each limiter's ended with its
	// client giving up. A run on a machine too loaded to send and answer
	// its requests in time shows the machine, not the limiter; Invalid
	// says why it is not valid.
	Valid   bool
	Invalid string
	// Subject and Reference are each limiter's phases; SubjectTrace and
	// ReferenceTrace their limits through the run, every TraceEvery.
	Subject, Reference           []PhaseResult
	SubjectTrace, ReferenceTrace []Point
}

// Figures formats the checks on one line.
func (v Verdict) Figures() string {
	s := make([]string, len(v.Checks))
	for i, c := range v.Checks {
		s[i] = c.String()
	}
	return strings.Join(s, "; ")
}

// Run runs the scenario through stack on network n with ctrl as the
// limiter's controller, beside the fixed Reference limit, and judges it.
// It takes the phases' time: in real time on Loopback, in fake time on
// Pipes inside a testing/synctest bubble.
func (s Scenario) Run(n Network, stack Stack, ctrl adaptive.Controller) Verdict {
	sub := newLane(s, n, stack, ctrl, s.Min, s.Max, s.Initial)
	ref := newLane(s, n, stack, hold{}, s.Reference, s.Reference, s.Reference)
	defer func() {
		sub.stop()
		ref.stop()
		sub.lim.Close()
		ref.lim.Close()
	}()
	run(s, sub, ref)
	v := Verdict{Scenario: s.Name, Stack: stack.Name, Checks: s.judge(s, sub, ref),
		Subject: sub.phases, Reference: ref.phases, SubjectTrace: sub.trace, ReferenceTrace: ref.trace}
	v.Invalid = s.invalid(sub, ref)
	v.Valid = v.Invalid == ""
	v.Pass = true
	for _, c := range v.Checks {
		v.Pass = v.Pass && c.Pass()
	}
	return v
}

// invalid returns why the run of sub and ref is not valid (see
// Verdict.Valid), or "" if it is.
func (s Scenario) invalid(lanes ...*lane) string {
	for i, ph := range s.Phases {
		slowest := max(time.Duration(float64(s.ServiceTime)*orOne(ph.Latency)), ph.SlowTime)
		if ph.Cancel > 0 || ph.Deadline > 0 || ph.Fault == Hang || ph.Fault == HangDeadline || slowest+s.QueueTimeout >= s.Timeout {
			continue
		}
		for j, l := range lanes {
			p := l.phases[i]
			n := 0
			for _, c := range p.Answers {
				n += c
			}
			if gone := p.Answers[Gone]; gone*100 > n {
				return fmt.Sprintf("%d of the %s's %d requests of the %s phase timed out, where the backend answers in time",
					gone, [...]string{"limiter", "reference"}[j], n, ph.Name)
			}
		}
	}
	return ""
}

// RunUntilValid runs the scenario as Run does until a run is valid (see
// Verdict.Valid), at most attempts times, with a fresh controller from
// ctrl each time, and returns the last run and how many it took. It waits
// ten seconds times the attempts made before each new one, for a burst of
// other work on the machine to pass.
func (s Scenario) RunUntilValid(n Network, stack Stack, ctrl func() adaptive.Controller, attempts int) (Verdict, int) {
	return s.runUntil(n, stack, ctrl, attempts, func(v Verdict) bool { return v.Valid })
}

// Trials returns how many runs over Pipes a test makes of a scenario
// before a miss fails it: 1 for a report, which shows what a run gives,
// and 3 for a gate. A run over Pipes has a fake clock, but the order in
// which the goroutines of the clients, the stack and the backend run is
// the scheduler's, so it is one trial of the scenario, and the default
// controller misses a criterion in a small share of the trials
// (docs/adaptive.md gives the rates). A controller that misses in every
// trial still fails the gate.
func Trials(report bool) int {
	if report {
		return 1
	}
	return 3
}

// RunUntilPassed is RunUntilValid, but goes on until a run is valid and
// passes: on a machine whose other work can starve the limiter's side of
// the stack for a phase (a real-time run, over loopback), one run that
// misses says less about the limiter than a miss on every attempt does;
// and over Pipes, where a run is one trial of an order of goroutines that
// the scheduler picks, one that misses says less than a miss in every
// trial does. In a testing/synctest bubble its waits are in fake time.
func (s Scenario) RunUntilPassed(n Network, stack Stack, ctrl func() adaptive.Controller, attempts int) (Verdict, int) {
	return s.runUntil(n, stack, ctrl, attempts, func(v Verdict) bool { return v.Valid && v.Pass })
}

func (s Scenario) runUntil(n Network, stack Stack, ctrl func() adaptive.Controller, attempts int, done func(Verdict) bool) (Verdict, int) {
	for i := 1; ; i++ {
		v := s.Run(n, stack, ctrl())
		if done(v) || i >= attempts {
			return v, i
		}
		time.Sleep(time.Duration(i) * 10 * time.Second)
	}
}

// Record is a Verdict with the name of the controller it judged and of
// the network it ran on ("loopback", or "fake time" for Pipes), as
// AppendRecord writes it: one line of JSON.
type Record struct {
	Controller, Network string
	Verdict
}

// AppendRecord appends r to file as a line of JSON, creating the file if
// it does not exist.
func AppendRecord(file string, r Record) error {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(f).Encode(r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Lengths are the lengths of the phases of Scenarios.
type Lengths struct {
	// Healthy comes before a failure, Failure is its length and Recovery
	// follows it; Quiet is the quiet stretch of the quiet-hours scenarios
	// and Slow the slow stretch of the latency step, which takes round
	// trips of 200 ms.
	Healthy, Failure, Recovery, Quiet, Slow time.Duration
}

var (
	// Full are the lengths of the scenarios as docs/adaptive.md reports
	// them.
	Full = Lengths{Healthy: 3 * time.Second, Failure: 3 * time.Second, Recovery: 4 * time.Second,
		Quiet: 20 * time.Second, Slow: 6 * time.Second}
	// Short are the lengths of the version that runs in CI.
	Short = Lengths{Healthy: time.Second, Failure: 1500 * time.Millisecond, Recovery: 1500 * time.Millisecond,
		Quiet: 4 * time.Second, Slow: 5 * time.Second}
)

// The standard scenario: a backend of Workers workers at ServiceTime, which
// completes 1000 requests a second, offered Rate; a client timeout of
// Timeout; a limiter in [1, 1000] starting at 20, against a fixed limit of
// Reference.
const (
	Workers      = 5
	ServiceTime  = 5 * time.Millisecond
	QueueTimeout = 100 * time.Millisecond
	Timeout      = 300 * time.Millisecond
	Rate         = 2000
	Reference    = 8
)

// Scenarios returns the standard scenarios with phases of the given
// lengths: the failures that adaptivetest.Scenarios simulates, and those
// only the real stack shows.
func Scenarios(l Lengths) []Scenario {
	std := func(name, criterion string, judge func(Scenario, *lane, *lane) []Check, phases ...Phase) Scenario {
		return Scenario{Name: name, Criterion: criterion, Workers: Workers, ServiceTime: ServiceTime,
			QueueTimeout: QueueTimeout, Timeout: Timeout, Min: 1, Max: 1000, Initial: 20, Reference: Reference,
			Phases: phases, judge: judge}
	}
	healthy := func(name string, d time.Duration) Phase { return Phase{Name: name, Duration: d, Rate: Rate} }
	failure := func(p Phase) Phase {
		p.Name, p.Duration = "failure", l.Failure
		if p.Rate == 0 {
			p.Rate = Rate
		}
		return p
	}
	around := func(p Phase) []Phase {
		return []Phase{healthy("healthy", l.Healthy), failure(p), healthy("recovery", l.Recovery)}
	}
	// quiet is a scenario of a backend of 50 workers at 5 ms (10,000 a
	// second) offered rate for d from the start, a limit from 100 that the
	// load never fills.
	quiet := func(name string, rate float64, d time.Duration) Scenario {
		return Scenario{Name: name,
			Criterion: fmt.Sprintf("%.0f requests a second to 50 workers at 5 ms (%.0f in flight), the limit from 100: the limit at the end within [0.75, 1.25] × where it was half a second in; goodput ≥ 0.95 × a fixed limit of 100's", rate, rate/200),
			Workers:   50, ServiceTime: ServiceTime, QueueTimeout: QueueTimeout, Timeout: Timeout,
			Min: 1, Max: 1000, Initial: 100, Reference: 100,
			Phases: []Phase{{Name: "quiet", Duration: d, Rate: rate}},
			judge:  judge(keptQuiet, holds(0, 0.95, 0)),
		}
	}
	// spike lasts at least 3 s, the failures' length in Full: a tenfold RTT
	// can take Gradient2 to its minimum and back within the spike's first
	// second and a bit, and the criterion judges the second half, which
	// starts after that.
	spike := around(Phase{Latency: 10})
	spike[1].Duration = max(spike[1].Duration, 3*time.Second)
	return []Scenario{
		std("total failure",
			"every request fails with a 503 at once: the limit is at its minimum within 0.5 s; goodput in the recovery's first second ≥ 0.85 × the reference's",
			judge(atMinimum, recovered(0.85)),
			around(Phase{Fault: FailFast})...),
		std("hang until the client gives up",
			"the backend answers nothing, and every client gives up after 300 ms: requests left hanging, of those sent once the first have been given up on, ≤ 0.5 × the reference's; goodput in the recovery's first second ≥ 0.85 × the reference's",
			judge(fewer(Gone, "hung", 0.5, func(s Scenario) time.Duration { return s.Timeout }), recovered(0.85)),
			around(Phase{Fault: Hang})...),
		std("hang until the server's deadline",
			"the backend answers 503 after 100 ms to every request: requests held 100 ms, of those sent once the first have been answered, ≤ 0.5 × the reference's; goodput in the recovery's first second ≥ 0.85 × the reference's",
			judge(fewer(Overloaded, "held", 0.5, func(s Scenario) time.Duration { return s.QueueTimeout }), recovered(0.85)),
			around(Phase{Fault: HangDeadline})...),
		std("fast errors",
			"half the requests are answered 500 at once: goodput ≥ 0.9 × and p99 ≤ 2 × the reference's through the failure; goodput in the recovery's first second ≥ 0.85 × the reference's",
			judge(holds(1, 0.9, 2), recovered(0.85)),
			around(Phase{Errors: 0.5})...),
		std("latency step",
			"the service time steps from 5 ms to 200 ms and back: from 1.5 s after the step, goodput ≥ 0.8 × the reference's, and the limit's standard deviation at most half its mean; goodput in the first second after ≥ 0.85 × the reference's",
			judge(settledSlow, recovered(0.85)),
			healthy("healthy", l.Healthy), Phase{Name: "failure", Duration: l.Slow, Rate: Rate, Latency: 40}, healthy("recovery", l.Recovery)),
		quiet("quiet hours, 1 in flight", 200, l.Quiet),
		quiet("quiet hours, 10 in flight", 2000, l.Quiet),
		std("short deadlines",
			"half the clients set a deadline of 2 ms, shorter than the service time: goodput ≥ 0.9 × the reference's through the failure, and in the recovery's first second",
			judge(holds(1, 0.9, 0), recovered(0.85)),
			around(Phase{Deadline: 0.5, DeadlineAfter: 2 * time.Millisecond})...),
		std("client-cancel storm",
			"half the clients cancel after 2 ms: goodput ≥ 0.9 × the reference's through the failure, and in the recovery's first second",
			judge(holds(1, 0.9, 0), recovered(0.85)),
			around(Phase{Cancel: 0.5, CancelAfter: 2 * time.Millisecond})...),
		std("latency spike",
			"the service time is ×10 through the failure: goodput ≥ 0.9 × the reference's over the second half of the failure and of the recovery",
			judge(holdsLate(1, 0.9), recoveredLate(0.9)),
			spike...),
		{
			Name:      "bimodal latency",
			Criterion: "90 % of requests take 2 ms and 10 % 40 ms, on 6 workers: goodput ≥ 0.8 × and p99 ≤ 2 × a fixed limit of 10, over the second half",
			Workers:   6, ServiceTime: 2 * time.Millisecond, QueueTimeout: QueueTimeout, Timeout: Timeout,
			Min: 1, Max: 1000, Initial: 20, Reference: 10,
			Phases: []Phase{{Name: "bimodal", Duration: l.Healthy + l.Failure + l.Recovery, Rate: Rate, Slow: 0.1, SlowTime: 40 * time.Millisecond}},
			judge:  judge(holds(0, 0.8, 2)),
		},
		{
			Name:      "instant service",
			Criterion: "the backend answers at once: the mean limit at least half where it started (an RTT the noise of the machine's timing makes most of is no queue); goodput ≥ 0.95 × the reference's",
			Workers:   Workers, ServiceTime: ServiceTime, QueueTimeout: QueueTimeout, Timeout: Timeout,
			Min: 1, Max: 1000, Initial: 20, Reference: Reference,
			Phases: []Phase{{Name: "instant", Duration: l.Healthy + l.Failure, Rate: Rate, Fault: Instant}},
			judge:  judge(heldUp, holds(0, 0.95, 0)),
		},
		{
			Name:      "slow start",
			Criterion: "from a limit of 1, 50 workers at 50 ms: goodput ≥ 0.9 × a fixed limit of 80 from 2 s on",
			Workers:   50, ServiceTime: 50 * time.Millisecond, QueueTimeout: QueueTimeout, Timeout: Timeout,
			Min: 1, Max: 1000, Initial: 1, Reference: 80,
			Phases: []Phase{{Name: "start", Duration: max(4*time.Second, l.Healthy+l.Failure+l.Recovery), Rate: Rate}},
			judge:  judge(startedBy(2 * time.Second)),
		},
	}
}

// A criterion returns the checks of one of a scenario's criteria.
type criterion func(s Scenario, sub, ref *lane) []Check

// judge returns a judge that applies every criterion in turn.
func judge(cs ...criterion) func(Scenario, *lane, *lane) []Check {
	return func(s Scenario, sub, ref *lane) []Check {
		var out []Check
		for _, c := range cs {
			out = append(out, c(s, sub, ref)...)
		}
		return out
	}
}

// span returns the start and end of phase i, from the start of the run.
func span(s Scenario, i int) (from, to time.Duration) {
	for j := range i {
		from += s.Phases[j].Duration
	}
	return from, from + s.Phases[i].Duration
}

// ratio returns a/b, counting 0/0 as 1.
func ratio(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return 1
		}
		return math.Inf(1)
	}
	return a / b
}

// atMinimum checks that the limit reaches its minimum within 0.5 s of the
// failure's start.
func atMinimum(s Scenario, sub, _ *lane) []Check {
	from, to := span(s, 1)
	at := sub.reach(from, to, func(l int64) bool { return l <= int64(s.Min) })
	if at < 0 {
		at = to - from
	}
	return []Check{{What: "at the minimum after (s)", Got: at.Seconds(), Bound: 0.5}}
}

// fewer checks that the failure ends fewer of the subject's requests with
// a, the answer of a request the failure holds for held, than the
// reference's: of the requests sent from held into the failure on, once
// the first such answers have shown it, which no limiter can do before.
func fewer(a Answer, what string, bound float64, held func(Scenario) time.Duration) criterion {
	return func(s Scenario, sub, ref *lane) []Check {
		from, to := span(s, 1)
		from += held(s)
		return []Check{{What: what + ", to the reference's", Got: ratio(float64(sub.count(a, from, to)), float64(ref.count(a, from, to))), Bound: bound}}
	}
}

// recovered checks the goodput over the first second of the phase after
// the failure (or the whole phase, if shorter) against the reference's.
func recovered(bound float64) criterion {
	return func(s Scenario, sub, ref *lane) []Check {
		from, to := span(s, len(s.Phases)-1)
		to = min(to, from+time.Second)
		return []Check{{What: "goodput after, to the reference's", Got: ratio(sub.goodput(from, to), ref.goodput(from, to)), Bound: bound, AtLeast: true}}
	}
}

// recoveredLate checks the goodput over the second half of the last phase
// against the reference's.
func recoveredLate(bound float64) criterion {
	return func(s Scenario, sub, ref *lane) []Check {
		from, to := span(s, len(s.Phases)-1)
		from += (to - from) / 2
		return []Check{{What: "goodput late after, to the reference's", Got: ratio(sub.goodput(from, to), ref.goodput(from, to)), Bound: bound, AtLeast: true}}
	}
}

// holds checks the goodput and (if p99 > 0) the p99 over phase i against
// the reference's: over its second half if it is the only phase.
func holds(i int, goodput, p99 float64) criterion {
	return func(s Scenario, sub, ref *lane) []Check {
		from, to := span(s, i)
		if len(s.Phases) == 1 {
			from += (to - from) / 2
		}
		out := []Check{{What: "goodput, to the reference's", Got: ratio(sub.goodput(from, to), ref.goodput(from, to)), Bound: goodput, AtLeast: true}}
		if p99 > 0 {
			out = append(out, Check{What: "p99, to the reference's", Got: ratio(float64(sub.p99(from, to)), float64(ref.p99(from, to))), Bound: p99})
		}
		return out
	}
}

// holdsLate checks the goodput over the second half of phase i against
// the reference's.
func holdsLate(i int, goodput float64) criterion {
	return func(s Scenario, sub, ref *lane) []Check {
		from, to := span(s, i)
		from += (to - from) / 2
		return []Check{{What: "goodput late, to the reference's", Got: ratio(sub.goodput(from, to), ref.goodput(from, to)), Bound: goodput, AtLeast: true}}
	}
}

// settledSlow checks the goodput over the slow stretch from 1.5 s (seven
// of its round trips) after it began against the reference's, and that
// the limit did not swing there: its standard deviation, over the limits
// traced, at most half its mean. A limit that cycles between 1 and 11
// has one of about 0.7; a sawtooth of Headroom's steps over a capacity
// of 5 (5 to 9) about 0.25.
func settledSlow(s Scenario, sub, ref *lane) []Check {
	from, to := span(s, 1)
	from += 1500 * time.Millisecond
	return []Check{
		{What: "goodput slow, to the reference's", Got: ratio(sub.goodput(from, to), ref.goodput(from, to)), Bound: 0.8, AtLeast: true},
		{What: "limit's deviation to its mean, slow", Got: sub.variation(from, to), Bound: 0.5},
	}
}

// keptQuiet checks that the limit at the end of the quiet stretch, the
// phase named "quiet", is within [0.75, 1.25] × the limit half a second
// into it, once any busy stretch's last requests have ended.
func keptQuiet(s Scenario, sub, _ *lane) []Check {
	i := slices.IndexFunc(s.Phases, func(p Phase) bool { return p.Name == "quiet" })
	from, to := span(s, i)
	_, _, _, before := sub.limits(from, from+500*time.Millisecond)
	_, _, _, after := sub.limits(from, to)
	r := ratio(float64(after), float64(before))
	return []Check{
		{What: "limit after quiet, to before", Got: r, Bound: 0.75, AtLeast: true},
		{What: "limit after quiet, to before", Got: r, Bound: 1.25},
	}
}

// heldUp checks that the mean limit through the run is at least half the
// initial.
func heldUp(s Scenario, sub, _ *lane) []Check {
	_, _, mean, _ := sub.limits(0, time.Duration(math.MaxInt64))
	return []Check{{What: "mean limit, to the initial", Got: mean / float64(s.Initial), Bound: 0.5, AtLeast: true}}
}

// startedBy checks the goodput from at to the end against the reference's.
func startedBy(at time.Duration) criterion {
	return func(s Scenario, sub, ref *lane) []Check {
		_, to := span(s, 0)
		return []Check{{What: "goodput from 2 s, to the reference's", Got: ratio(sub.goodput(at, to), ref.goodput(at, to)), Bound: 0.9, AtLeast: true}}
	}
}
