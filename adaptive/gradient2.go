package adaptive

import (
	"math"
	"time"
)

// Gradient2 is the gradient controller of Netflix's concurrency-limits
// (Gradient2Limit), with its unbounded growth fixed. Once per window of
// samples (see AIMD) it compares the window's mean RTT with a baseline, the
// RTT the service shows without a queue:
//
//	gradient = clamp(Tolerance × baseline / rtt, 0.5, 1)    (0.5 on a drop)
//	gradient < 1:  limit = limit × (1 − Smoothing) + limit × gradient × Smoothing
//	gradient = 1:  limit = limit + Headroom, while rtt ≤ (1 + (Tolerance − 1)/2) × baseline
//
// so the limit grows by Headroom a window while the RTT is in the lower
// half of the tolerated band, holds in the upper half, and shrinks in
// proportion to the excess beyond it. It is not changed while fewer than
// half the limit are in flight, and grows only when the requests filled
// it (see the package documentation). The limit it settles at is where the RTT
// is about Tolerance times the baseline: for a service whose latency grows
// in proportion to its queue, Tolerance times its capacity.
//
// # What differs from Netflix's Gradient2Limit, and why
//
// Netflix's baseline is a long exponential average of every sample's RTT,
// and its queue term is added whatever the gradient. Under modest overload
// the two feed each other (Netflix/concurrency-limits#134): the fixed
// point of limit × gradient + queue lies above the capacity whenever the
// gradient is near 1, and the average takes in the queueing delay the
// higher limit causes, so the RTT stops looking high, the gradient returns
// to 1 and the limit climbs again, without bound; only timeouts stop it.
// Three changes make it settle:
//
//   - The headroom is added only when the gradient is 1 (the change
//     proposed in #134), and only in the lower half of the tolerated band,
//     so that the round trip the RTT takes to show a change does not carry
//     the limit past the band. A drop counts as a gradient of 0.5 instead
//     of being ignored.
//   - The baseline is never an average of loaded samples. As in Envoy's
//     adaptive concurrency filter, it is measured in a probe, at the first
//     window whose requests fill the limit (or drop one) and then every
//     ProbeInterval × limit samples: the controller
//     lowers the limit to three quarters, ignores the requests admitted
//     before, and takes the mean RTT of about one limit's worth of the
//     next ones (at least ten). While a step's mean differs by more than
//     10 % from the last step's (for the first, from the baseline), or a
//     step saw a drop, it takes another step down. The smallest mean of
//     the steps becomes the baseline, until the next probe. A probe that
//     falls due just after a window lowered the limit waits for the next
//     window (at most a tenth of the interval), as stepping down from a
//     limit just cut would compound the cut. The limit
//     then goes back to what it was if that limit's RTT was within
//     Tolerance of the new baseline, else to the largest probed limit whose
//     RTT was. A queue the limit builds therefore never becomes part of the
//     baseline. A probe falls due only while the load fills the limit: one
//     the load does not fill is neither raised nor lowered, and a quiet
//     night leaves the limit where the day left it. A probe whose steps
//     bound nothing goes back to the limit it left.
//   - A service whose own latency changes is followed without waiting for
//     a probe. A window faster than the baseline lowers it at once. A
//     slower one is cut, as a queue would be; when the cuts have taken a
//     quarter of the requests in flight and the RTT has not fallen, by
//     more than 10 %, no queue of the limit's made it, and that RTT
//     becomes the baseline (a latency step from 5 ms to 200 ms is followed
//     within a few round trips of 200 ms, where a probe would come after
//     100 × limit samples).
//   - Decisions are made once per window, not once per sample, with a
//     Smoothing of 0.5 rather than Netflix's 0.2 per sample.
//
// As AIMD does, it takes the limit to its minimum once as many requests in
// a row were dropped as the limit admits, and doubles it back, after the
// failure, up to half what it was (see AIMD). LatencyBound, the latency
// past which a request that ends Inconclusive counts as Dropped, is four
// times Tolerance times the baseline.
//
// A probe costs throughput while it lasts: settled at Tolerance times the
// capacity, one step of three quarters leaves the service a little below
// capacity for about two round trips, in every hundred or so.
//
// Set the fields before passing the Gradient2 to New; a Gradient2 serves
// one Limiter. The zero value uses the defaults.
type Gradient2 struct {
	// Tolerance ≥ 1 is how many times the baseline the RTT may reach before
	// the limit shrinks; 0 means 1.1.
	Tolerance float64
	// Smoothing in (0, 1] is the weight of the shrunk limit against the
	// current one; 0 means 0.5.
	Smoothing float64
	// Headroom is how far the limit grows a window while the RTT shows no
	// queue; 0 means 4.
	Headroom float64
	// ProbeInterval is the number of samples between probes, in multiples
	// of the limit, at least 2; 0 means 100.
	ProbeInterval float64

	baseline   time.Duration // the probe's mean RTT, or a lower window mean since
	measured   bool          // whether baseline is known
	last       time.Duration // the mean RTT of the last window
	hasLast    bool          // whether last is known
	sinceProbe float64       // samples since the last probe ended
	lowered    bool          // whether the last window lowered the limit
	filled     bool          // whether the last window filled the limit
	deferred   float64       // samples a due probe has waited for a window after a cut
	win        window
	probe      probe
	slower     slower
	resume     resume
}

// Validate returns an error wrapping ErrInvalidController if a field is
// out of its range (NaN and infinities included), nil otherwise. New
// calls it.
func (g *Gradient2) Validate() error {
	switch {
	case g.Tolerance != 0 && !(g.Tolerance >= 1 && !math.IsInf(g.Tolerance, 1)):
		return invalid("Gradient2.Tolerance %v is outside [1, +Inf)", g.Tolerance)
	case !(g.Smoothing >= 0 && g.Smoothing <= 1):
		return invalid("Gradient2.Smoothing %v is outside (0, 1]", g.Smoothing)
	case !(g.Headroom >= 0 && !math.IsInf(g.Headroom, 1)):
		return invalid("Gradient2.Headroom %v is outside [0, +Inf)", g.Headroom)
	case g.ProbeInterval != 0 && !(g.ProbeInterval >= 2 && !math.IsInf(g.ProbeInterval, 1)):
		// A probe takes about two limits' worth of samples: an interval
		// shorter than that keeps the limit stepped down, probing, most
		// of the time.
		return invalid("Gradient2.ProbeInterval %v is outside [2, +Inf): a probe takes about two limits' worth of samples", g.ProbeInterval)
	}
	return nil
}

// Next implements Controller.
func (g *Gradient2) Next(limit float64, s Sample) float64 {
	if g.probe.active {
		return g.probeNext(s)
	}
	g.sinceProbe++
	switch {
	case !g.measured && !s.Dropped && s.RTT == 0:
		// An RTT the clock cannot resolve: no probe can measure less.
		g.baseline, g.measured = 0, true
	case g.measured && g.sinceProbe >= orDefault(g.ProbeInterval, 100)*limit:
		if (g.hasLast && g.last <= g.baseline) || !g.filled {
			// The last window showed no queue, and a probe would measure
			// the same; or the load does not fill the limit, which a probe
			// is not to lower.
			g.sinceProbe, g.deferred = 0, 0
			break
		}
		if g.lowered && g.deferred < orDefault(g.ProbeInterval, 100)*limit/10 {
			// The last window lowered the limit: let the next one, at the
			// lowered limit, report before the probe steps down from it,
			// as it may show no queue (and make the probe needless), and
			// two cuts in a row would compound. The wait is bounded (by a
			// tenth of the interval), so that a limit that falls window
			// after window is still probed.
			g.deferred++
			break
		}
		return g.probe.begin(limit, g.last, g.hasLast, g.baseline, true, s.End())
	}

	if !g.win.add(limit, s) {
		return limit
	}
	w := g.win.close(limit, s)
	g.lowered = false
	g.filled = w.filled(limit)
	if w.failed {
		g.resume.fail(w.before)
		return 1 // nothing completed: to the minimum, which the Limiter enforces
	}
	if !g.measured {
		// The first window that fills the limit, or drops a request,
		// starts the probe that measures the baseline; until then the
		// limit binds nothing, and there is nothing to judge.
		if g.filled || w.dropped {
			return g.probe.begin(limit, 0, false, 0, false, s.End())
		}
		return limit
	}
	gradient := 0.5 // a drop
	if !w.dropped {
		// A window faster than the baseline shows a service that got
		// faster since the probe; a slower one is the service's own
		// latency if fewer requests in flight did not make it faster
		// (see slower), and otherwise left to the next probe, which
		// tells a slower service from a queue.
		g.baseline = min(g.baseline, w.rtt)
		if float64(w.inFlight)*2 < limit {
			return limit // application-limited: the RTT says nothing about the limit
		}
		if rtt, ok := g.slower.observe(w, limit, g.baseline); ok && rtt > g.baseline {
			g.baseline = rtt
		}
		g.last, g.hasLast = w.rtt, true
		gradient = 1
		if tolerated := g.tolerance() * float64(g.baseline); float64(w.rtt) > tolerated {
			gradient = math.Max(0.5, tolerated/float64(w.rtt))
		}
	}
	if gradient == 1 {
		// Grow only while the RTT is in the lower half of the tolerated
		// band, and hold in the upper half: growing up to the edge would
		// overshoot it by the round trip the RTT takes to show a change.
		if g.unqueued(w.rtt) && g.filled {
			return g.resume.grow(limit, limit+orDefault(g.Headroom, 4))
		}
		return limit
	}
	sm := orDefault(g.Smoothing, 0.5)
	g.lowered = true
	g.resume.stop()
	return limit*(1-sm) + limit*gradient*sm
}

// LatencyBound returns how long a request may last before, if it ends
// Inconclusive, it counts as Dropped: four times the RTT Tolerance allows
// above the baseline, or 0 while no baseline has been measured (see
// WithLatencyBound).
func (g *Gradient2) LatencyBound() time.Duration {
	if !g.measured {
		return 0
	}
	return time.Duration(boundFactor * g.tolerance() * float64(g.baseline))
}

// probeNext takes a sample during a probe and returns the limit to use.
func (g *Gradient2) probeNext(s Sample) float64 {
	limit, baseline, done, measured := g.probe.add(s)
	if !done {
		return limit
	}
	g.sinceProbe, g.deferred = 0, 0
	g.win.restart(s.End())
	if !measured {
		g.resume.fail(g.probe.saved)
		return 1 // a step completed nothing: as a window that did not
	}
	g.baseline, g.measured = baseline, true
	if !g.probe.bound {
		return g.probe.saved // no step bound the requests: nothing to lower
	}
	// Go back to the limit before the probe if its RTT was within
	// tolerance of the new baseline; else to the largest probed limit
	// whose RTT was, and let the gradient raise it from there.
	return g.probe.exit(func(_ float64, rtt time.Duration) bool {
		return float64(rtt) <= g.tolerance()*float64(g.baseline)
	})
}

// unqueued reports whether rtt is in the lower half of the tolerated band
// above the baseline, where the limit grows: no sign of a queue.
func (g *Gradient2) unqueued(rtt time.Duration) bool {
	return float64(rtt) <= (1+(g.tolerance()-1)/2)*float64(g.baseline)
}

func (g *Gradient2) tolerance() float64 { return orDefault(g.Tolerance, 1.1) }
