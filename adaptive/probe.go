package adaptive

import (
	"math"
	"time"
)

// probe measures the RTT a service shows without a queue, for the
// delay-based controllers (Gradient2's baseline, Vegas's rttNoLoad), as
// Envoy's adaptive concurrency filter measures its minimum RTT: at a lower
// limit, never from the samples of the limit under test.
//
// A probe lowers the limit to probeFactor of what it was, ignores the
// requests admitted before, and takes the mean RTT of about one limit's
// worth of the next ones (at least ten). While a step's mean differs by
// more than 10 % from the previous step's (for the first, from the
// baseline the controller had), or a step saw a drop, it takes another
// step down: a limit that still queues gives a mean that falls with it,
// and two steps that agree show the RTT that no queue changes. The
// smallest mean of the steps is the measurement. Drops count toward a
// step's samples, so that a step ends however the requests do; a step in
// which no request completed ends the probe without a measurement, as the
// sign of a service that fails at any limit. The probe keeps the mean
// RTT of every step, so that its controller can choose the limit to go
// back to (see exit), and whether any step's limit bound the requests in
// flight: a probe whose steps bound nothing measured what the load shows
// at any limit, and its controller goes back to the limit it left.
//
// A queue that the limit builds therefore never enters the measurement,
// however long it has stood: a service queued from its first request, or
// whose capacity falls, shows its unloaded RTT at the step that first
// drops below its capacity.
type probe struct {
	active    bool
	saved     float64       // the limit before the probe
	before    time.Duration // the mean RTT of the last window before the probe
	hasBefore bool          // whether before is known
	limit     float64       // the limit of this step
	since     time.Time     // samples of requests admitted earlier are ignored
	n, ok     int           // samples taken in this step, and those not dropped
	sum       time.Duration // of the RTTs of those not dropped
	sumSq     float64       // of their squares, in seconds², for the step's noise
	noise     float64       // the standard error of the previous step's mean, in seconds
	best      time.Duration // the mean RTT of the previous step, or the baseline
	hasBest   bool          // whether best is known
	steps     []probeStep   // the finished steps that saw no drop
	bound     bool          // whether a step's limit bound the requests in flight
	run       int           // drops in a row, whenever the requests were admitted
}

// probeStep is a finished step of a probe: its limit and mean RTT.
type probeStep struct {
	limit float64
	mean  time.Duration
}

// probeFactor is what each probe step multiplies the limit by. Settled, a
// delay-based controller holds the limit a little above the service's
// capacity, so one step of three quarters takes it below capacity, where
// nothing queues, while leaving most of the throughput; a limit far above
// capacity takes a few more steps.
const probeFactor = 0.75

// begin starts a probe from limit, whose last window had a mean RTT of
// before (if hasBefore), comparing its first step with baseline (if
// hasBaseline), and counting only the requests admitted from at on. It
// returns the first step's limit.
func (p *probe) begin(limit float64, before time.Duration, hasBefore bool, baseline time.Duration, hasBaseline bool, at time.Time) float64 {
	// The first step compares with the current baseline: when lowering
	// the limit does not beat it, the baseline stands after one step.
	*p = probe{active: true, saved: limit, before: before, hasBefore: hasBefore,
		best: baseline, hasBest: hasBaseline, steps: p.steps[:0]} // noise 0: the baseline's is not known
	return p.step(limit*probeFactor, at)
}

// step starts a probe step at limit, counting only the requests admitted
// from since on, and returns the step's limit.
func (p *probe) step(limit float64, since time.Time) float64 {
	p.limit = math.Max(1, limit)
	p.since = since
	p.n, p.ok, p.sum, p.sumSq = 0, 0, 0, 0
	return p.limit
}

// add takes sample s during a probe. It returns the limit to use and
// whether s ended the probe; if it did, measured reports whether the probe
// measured an RTT, rtt. A probe ends without a measurement when a step
// completes no request at all: the service fails at any limit, and its
// controller treats that as a window in which nothing completed. It
// requires p.active.
//
// A step counts its drops with its other samples, so that a service that
// drops every request still ends each step; and as many drops in a row as
// the step admits end the probe at once.
func (p *probe) add(s Sample) (limit float64, rtt time.Duration, done, measured bool) {
	p.run++
	if !s.Dropped {
		p.run = 0
	}
	if float64(p.run) >= math.Ceil(p.limit) {
		// As many drops in a row as the step admits: the service answers
		// nothing (see summary.failed).
		p.active = false
		return p.limit, 0, true, false
	}
	if s.Start.Before(p.since) {
		return p.limit, 0, false, false // admitted before this step
	}
	p.n++
	if !s.Dropped {
		p.ok++
		p.sum += s.RTT
		p.sumSq += s.RTT.Seconds() * s.RTT.Seconds()
	}
	p.bound = p.bound || s.Limited || float64(s.InFlight) >= math.Floor(p.limit)
	if float64(p.n) < math.Max(p.limit, 10) {
		return p.limit, 0, false, false
	}
	if p.ok == 0 {
		p.active = false
		return p.limit, 0, true, false
	}
	dropped := p.ok < p.n // the step still overloads; its RTTs are cut short
	mean := p.sum / time.Duration(p.ok)
	m := mean.Seconds()
	noise := math.Sqrt(max(0, p.sumSq/float64(p.ok)-m*m) / float64(p.ok)) // the standard error of mean
	if !dropped {
		p.steps = append(p.steps, probeStep{p.limit, mean})
	}
	// A step that disagrees with the previous one may still queue: take
	// another step down, unless the limit is as low as it goes. Two steps
	// agree within 10 %, or within twice the noise of their means: an RTT
	// that varies from one request to the next by more than the steps'
	// difference shows no queue that the step took away.
	agree := p.hasBest && (near(mean, p.best) || math.Abs(m-p.best.Seconds()) <= 2*math.Hypot(noise, p.noise))
	if (dropped || !agree) && p.limit > 1 {
		p.best, p.hasBest, p.noise = mean, !dropped, noise // a step cut short by drops is no mean to compare with
		return p.step(p.limit*probeFactor, s.End()), 0, false, false
	}
	for _, st := range p.steps {
		mean = min(mean, st.mean)
	}
	p.active = false
	return p.limit, mean, true, true
}

// exit returns the limit to go back to after a probe: the limit before it,
// if fits accepts that limit with the RTT its last window had; else the
// largest probed limit that fits accepts with the RTT its step measured,
// or the last step's limit if it accepts none. fits reports whether a
// limit with a given RTT holds no more queue than its controller allows,
// judged against the measurement the probe has just made.
func (p *probe) exit(fits func(limit float64, rtt time.Duration) bool) float64 {
	if p.hasBefore && fits(p.saved, p.before) {
		return p.saved
	}
	next := p.limit
	for _, st := range p.steps {
		if fits(st.limit, st.mean) {
			next = max(next, st.limit)
		}
	}
	return next
}

// near reports whether a and b are within 10 % of each other.
func near(a, b time.Duration) bool {
	return float64(a) <= 1.1*float64(b) && float64(b) <= 1.1*float64(a)
}

// slower tells a service that got slower from a queue without a probe.
// The RTT of a service that queues the requests a limit admits falls with
// the requests in flight; that of a service that got slower does not. In
// an episode of windows whose mean RTT is more than 10 % above the
// unloaded one, once a window that filled its limit and completed every
// request has at most slowerStep of an earlier one's requests in flight,
// with mean RTTs within 10 % of each other, no queue of the limit's made
// it: the RTT is the service's own, and observe returns it. A window whose
// RTT has moved more than that begins the comparison again from itself.
// A window of one request in flight queues behind none of the limit's,
// and its RTT is the service's own at once: a limit cut to its minimum
// cannot show the requests in flight falling. A delay-based controller
// whose limit a slower service cuts finds it so once its cuts add up to a
// probe's step, where a probe would wait for the next due one.
type slower struct {
	inFlight int64         // of the window the comparison is from
	rtt      time.Duration // its mean RTT
	ok       bool          // whether the comparison is on
}

// slowerStep is how far the requests in flight must fall within an episode
// for slower to take its RTT for the service's own: as far as a probe's
// step.
const slowerStep = probeFactor

// observe takes the summary of a window that completed every request, at
// limit, given the unloaded RTT, and returns the service's RTT if the
// episode it continues shows one (see slower).
func (f *slower) observe(w summary, limit float64, unloaded time.Duration) (time.Duration, bool) {
	switch {
	case float64(w.rtt) <= 1.1*float64(unloaded):
		f.ok = false // no slower than the unloaded RTT: the episode is over
		return 0, false
	case !w.filled(limit):
		return 0, false
	case w.inFlight <= 1:
		f.ok = false
		return w.rtt, true
	case !f.ok || !near(w.rtt, f.rtt):
		*f = slower{inFlight: w.inFlight, rtt: w.rtt, ok: true} // compare from here
		return 0, false
	case float64(w.inFlight) > slowerStep*float64(f.inFlight):
		return 0, false
	}
	f.ok = false
	return min(w.rtt, f.rtt), true
}
