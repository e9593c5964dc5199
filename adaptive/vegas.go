package adaptive

import (
	"math"
	"math/rand/v2"
	"time"
)

// Vegas is the delay-based controller of Netflix's concurrency-limits
// (VegasLimit), after TCP Vegas, with its unloaded RTT measured at a lower
// limit. It estimates the queue the limit builds in the service from the
// ratio of the unloaded RTT to the current one,
//
//	queue = limit × (1 − rttNoLoad / rtt)
//
// and moves the limit to keep that queue between Alpha and Beta requests,
// once per window of samples as AIMD does (rtt is the window's mean):
// up by Beta when the queue is at most log10(limit) (no queueing), up by
// log10(limit) below Alpha, down by log10(limit) above Beta and on a drop,
// and not at all in between or while fewer than half the limit are in
// flight; it grows only when the requests filled it (see the package
// documentation). The step is blended with the current limit by Smoothing.
// Netflix's VegasLimit takes these steps on every sample; taken once per
// round trip instead, they are TCP Vegas's.
//
// # What differs from Netflix's VegasLimit, and why
//
// Netflix's rttNoLoad is the smallest RTT seen, and every ProbeMultiplier ×
// limit samples or so it is replaced by the RTT of the next sample, so that
// it can follow a service whose unloaded latency rises. A service queued
// from the first request (a limit that starts far above its capacity), or
// whose capacity falls, never shows it the unloaded RTT: the smallest RTT
// seen is a queued one, and the replacement adopts another. The queue then
// looks empty and the limit stays where it is, or climbs; only drops bring
// it down, by log10(limit) a window, and every request waits out the
// queue.
//
// This Vegas measures rttNoLoad as Gradient2 measures its baseline, in a
// probe at a lower limit, as Envoy's adaptive concurrency filter measures
// its minimum RTT and BBR its round-trip propagation time. At the first
// window whose requests fill the limit (or drop one), and then every
// ProbeMultiplier × limit samples (times a jitter
// in [0.5, 1), so that limiters started together probe apart), it lowers
// the limit to three quarters, ignores the requests admitted before, and
// takes the mean RTT of about one limit's worth of the next ones (at least
// ten). While a step's mean differs by more than 10 % from the last step's
// (for the first, from rttNoLoad), or a step saw a drop, it takes another
// step down. The smallest mean of the steps becomes rttNoLoad. A probe
// that falls due is skipped while a window within the last five limits'
// worth of samples showed a queue of at most Beta: the limit is where the
// rule wants it, and a probe would measure the same. The limit then goes
// back to what it was if the queue its last window showed, estimated
// against the new rttNoLoad, is at most Beta (the rule would not lower
// it); else to the largest probed limit whose queue was, from which the
// rule takes over. A queue the limit builds therefore never becomes
// the unloaded RTT. A probe falls due only while the load fills the
// limit, so a limit the load does not fill is neither raised nor lowered,
// and a probe whose steps bound nothing goes back to the limit it left.
// A service whose latency falls is followed at once, since a window whose
// mean RTT is below rttNoLoad lowers it; one whose latency rises is
// followed once the steps down that its queue estimate takes add up to a
// quarter of the requests in flight without the RTT falling by more than
// 10 %, which shows that no queue of the limit's made it (as Gradient2
// does), or at the next probe.
//
// As AIMD does, it takes the limit to its minimum once as many requests in
// a row were dropped as the limit admits, and doubles it back, after the
// failure, up to half what it was (see AIMD). LatencyBound is four times
// rttNoLoad.
//
// A probe costs throughput while it lasts: settled a few requests above
// the capacity, a step of three quarters leaves the service below
// capacity for about two round trips, once every 15 to 30 round trips
// with the default ProbeMultiplier.
//
// Set the fields before passing the Vegas to New; a Vegas serves one
// Limiter. The zero value uses the defaults.
type Vegas struct {
	// Alpha is the queue size below which the limit grows; 0 means
	// 3 × log10(limit). New refuses an Alpha above Beta at some limit
	// within the Limiter's bounds.
	Alpha int
	// Beta is the queue size above which the limit shrinks; 0 means
	// 6 × log10(limit). New refuses a Beta below Alpha at some limit
	// within the Limiter's bounds, or not below the maximum limit.
	Beta int
	// Smoothing in (0, 1] is the weight of the new limit against the
	// current one; 0 means 1, no smoothing.
	Smoothing float64
	// ProbeMultiplier sets how often a probe measures rttNoLoad afresh:
	// every ProbeMultiplier × limit samples, times a jitter in [0.5, 1);
	// at least 2, and 0 means 30.
	ProbeMultiplier int

	rttNoLoad  time.Duration // the probe's measurement, or a lower window mean since
	measured   bool          // whether rttNoLoad is known
	last       time.Duration // the mean RTT of the last window that was not application-limited
	hasLast    bool          // whether last is known
	filled     bool          // whether the last window filled the limit
	win        window
	probe      probe
	slower     slower
	resume     resume
	probeCount int     // samples since the last probe ended
	sinceCalm  float64 // samples since a window last showed no more queue than Beta
	jitter     float64 // in [0.5, 1): scales the interval between probes
	rng        rand.PCG
	seeded     bool
}

// Validate returns an error wrapping ErrInvalidController if a field is
// out of its range (NaN included), nil otherwise. New calls it.
func (v *Vegas) Validate() error {
	switch {
	case v.Alpha < 0 || v.Beta < 0:
		return invalid("Vegas.Alpha %d and Beta %d must not be negative", v.Alpha, v.Beta)
	case v.Alpha != 0 && v.Beta != 0 && v.Alpha > v.Beta:
		return invalid("Vegas.Alpha %d is above Beta %d", v.Alpha, v.Beta)
	case !(v.Smoothing >= 0 && v.Smoothing <= 1):
		return invalid("Vegas.Smoothing %v is outside (0, 1]", v.Smoothing)
	case v.ProbeMultiplier != 0 && v.ProbeMultiplier < 2:
		// A probe takes about two limits' worth of samples: an interval
		// shorter than that keeps the limit stepped down, probing, most
		// of the time.
		return invalid("Vegas.ProbeMultiplier %d is below 2: a probe takes about two limits' worth of samples", v.ProbeMultiplier)
	}
	return nil
}

// validateWithin returns an error wrapping ErrInvalidController if Alpha
// or Beta cannot work with a limit in [min, max], nil otherwise. New calls
// it. Alpha above Beta at some limit, where one of them takes its default
// (which grows with the limit), makes the limit grow through the queue
// that should lower it; a Beta of max or more is a queue the estimate,
// which is at most the limit, never exceeds, so that only drops lower the
// limit.
func (v *Vegas) validateWithin(min, max float64) error {
	switch {
	case v.Alpha != 0 && v.Beta == 0 && float64(v.Alpha) > 6*log10Floor(min):
		return invalid("Vegas.Alpha %d is above Beta's default, 6 × ⌊log10(limit)⌋, at the minimum limit %v: set Beta too", v.Alpha, min)
	case v.Beta != 0 && v.Alpha == 0 && float64(v.Beta) < 3*log10Floor(max):
		return invalid("Vegas.Beta %d is below Alpha's default, 3 × ⌊log10(limit)⌋, at the maximum limit %v: set Alpha too", v.Beta, max)
	case v.Beta != 0 && float64(v.Beta) >= max:
		return invalid("Vegas.Beta %d is not below the maximum limit %v: the queue Vegas estimates never exceeds it", v.Beta, max)
	}
	return nil
}

// Next implements Controller.
func (v *Vegas) Next(limit float64, s Sample) float64 {
	if v.probe.active {
		return v.probeNext(s)
	}
	if !v.seeded {
		// Seeded from the first sample's time, so that limiters started
		// apart probe apart, and a run in fake time is reproducible.
		v.rng.Seed(uint64(s.Start.UnixNano()), 0x9e3779b97f4a7c15)
		v.seeded = true
	}
	v.probeCount++
	v.sinceCalm++
	switch {
	case !v.measured && !s.Dropped && s.RTT == 0:
		// An RTT the clock cannot resolve: no probe can measure less.
		v.rttNoLoad, v.measured = 0, true
		v.resetProbe()
	case v.measured && v.jitter*float64(orDefaultInt(v.ProbeMultiplier, 30))*limit <= float64(v.probeCount):
		if v.sinceCalm < 5*limit || !v.filled {
			// A window showed no more queue than Beta within the last five
			// limits' worth of samples: the limit is where the rule
			// wants it, and a probe would measure the same. Or the load
			// does not fill the limit, which a probe is not to lower.
			v.resetProbe()
			break
		}
		return v.probe.begin(limit, v.last, v.hasLast, v.rttNoLoad, true, s.End())
	}

	if !v.win.add(limit, s) {
		return limit
	}
	w := v.win.close(limit, s)
	v.filled = w.filled(limit)
	if w.failed {
		v.resume.fail(w.before)
		return 1 // nothing completed: to the minimum, which the Limiter enforces
	}
	if !v.measured {
		// The first window that fills the limit, or drops a request,
		// starts the probe that measures rttNoLoad; until then the limit
		// binds nothing, and there is nothing to judge.
		if v.filled || w.dropped {
			return v.probe.begin(limit, 0, false, 0, false, s.End())
		}
		return limit
	}
	lg := log10Floor(limit)
	next := limit - lg // a drop
	if !w.dropped {
		// A window faster than rttNoLoad shows a service that got faster
		// since the probe; a slower one is the service's own latency if
		// fewer requests in flight did not make it faster (see slower),
		// and otherwise left to the next probe, which tells a slower
		// service from a queue.
		v.rttNoLoad = min(v.rttNoLoad, w.rtt)
		if float64(w.inFlight)*2 < limit {
			return limit // application-limited: the RTT says nothing about the limit
		}
		if rtt, ok := v.slower.observe(w, limit, v.rttNoLoad); ok && rtt > v.rttNoLoad {
			v.rttNoLoad = rtt
		}
		v.last, v.hasLast = w.rtt, true
		queue := v.queue(limit, w.rtt)
		if queue <= v.beta(limit) {
			v.sinceCalm = 0 // a queue the rule does not lower the limit for
		}
		switch {
		case queue < v.alpha(limit) && !v.filled:
			return limit // a limit the requests do not reach is not raised
		case queue <= lg:
			next = v.resume.grow(limit, limit+v.beta(limit))
		case queue < v.alpha(limit):
			next = v.resume.grow(limit, limit+lg)
		case queue > v.beta(limit):
			next = limit - lg
		default:
			return limit
		}
	}
	if next < limit {
		v.resume.stop()
	}
	sm := orDefault(v.Smoothing, 1)
	return (1-sm)*limit + sm*math.Max(1, next)
}

// LatencyBound returns how long a request may last before, if it ends
// Inconclusive, it counts as Dropped: four times rttNoLoad, or 0 while
// none has been measured (see WithLatencyBound).
func (v *Vegas) LatencyBound() time.Duration {
	if !v.measured {
		return 0
	}
	return boundFactor * v.rttNoLoad
}

// probeNext takes a sample during a probe and returns the limit to use.
func (v *Vegas) probeNext(s Sample) float64 {
	limit, rtt, done, measured := v.probe.add(s)
	if !done {
		return limit
	}
	v.resetProbe()
	v.win.restart(s.End())
	if !measured {
		v.resume.fail(v.probe.saved)
		return 1 // a step completed nothing: as a window that did not
	}
	v.rttNoLoad, v.measured = rtt, true
	if !v.probe.bound {
		return v.probe.saved // no step bound the requests: nothing to lower
	}
	// Go back to the limit before the probe if Vegas would not have
	// lowered it, measured against the new rttNoLoad; else to the largest
	// probed limit it would not lower, and let the rule raise it from
	// there.
	return v.probe.exit(func(limit float64, rtt time.Duration) bool {
		return v.queue(limit, rtt) <= v.beta(limit)
	})
}

// queue returns the queue that limit builds in the service, as estimated
// from its RTT: limit × (1 − rttNoLoad/rtt), rounded up.
func (v *Vegas) queue(limit float64, rtt time.Duration) float64 {
	if rtt <= v.rttNoLoad {
		return 0 // no queue, and no division by an RTT of 0
	}
	return math.Ceil(limit * (1 - float64(v.rttNoLoad)/float64(rtt)))
}

func (v *Vegas) alpha(limit float64) float64 {
	return float64(orDefaultInt(v.Alpha, int(3*log10Floor(limit))))
}

func (v *Vegas) beta(limit float64) float64 {
	return float64(orDefaultInt(v.Beta, int(6*log10Floor(limit))))
}

func (v *Vegas) resetProbe() {
	v.probeCount = 0
	v.jitter = 0.5 + 0.5*float64(v.rng.Uint64()>>11)/(1<<53)
}

// log10Floor returns ⌊log10(x)⌋, at least 1, as Netflix's Log10RootFunction.
func log10Floor(x float64) float64 {
	return math.Max(1, math.Floor(math.Log10(x)))
}

// orDefaultInt returns v, or def when v is zero.
func orDefaultInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
