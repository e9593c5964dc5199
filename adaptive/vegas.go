package adaptive

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Vegas is the delay-based controller of Netflix's concurrency-limits
// (VegasLimit), after TCP Vegas: it estimates the queue the limit builds in
// the service from the ratio of the unloaded RTT to the current one,
//
//	queue = limit × (1 − rttNoLoad / rtt)
//
// and moves the limit to keep that queue between Alpha and Beta requests,
// once per window of samples as AIMD does (rtt is the window's mean):
// up by Beta when the queue is at most log10(limit) (no queueing), up by
// log10(limit) below Alpha, down by log10(limit) above Beta and on a drop,
// and not at all in between or while fewer than half the limit are in
// flight. The step is blended with the current limit by Smoothing.
//
// Netflix's VegasLimit takes these steps on every sample; taken once per
// round trip instead, they are TCP Vegas's. rttNoLoad is the smallest RTT
// seen since the last probe. Every ProbeMultiplier × limit samples or so
// (jittered by a factor in [0.5, 1)), Vegas forgets it and takes the next
// sample as the new one, so that the estimate can follow a service whose
// unloaded latency rises.
//
// That is also where Vegas falls short. A service queued from the first
// request (a limit that starts far above its capacity), or whose capacity
// falls, never shows Vegas its unloaded RTT: the smallest RTT seen is a
// queued one, and the probe replaces it with another. The queue then looks
// empty and the limit stays where it is, or climbs; only drops bring it
// down, by log10(limit) a window. Gradient2, which measures its baseline
// at a lower limit, does not have the problem; docs/adaptive.md has the
// figures of both.
//
// Set the fields before passing the Vegas to New; a Vegas serves one
// Limiter. The zero value uses the defaults.
type Vegas struct {
	// Alpha is the queue size below which the limit grows; 0 means
	// 3 × log10(limit).
	Alpha int
	// Beta is the queue size above which the limit shrinks; 0 means
	// 6 × log10(limit).
	Beta int
	// Smoothing in (0, 1] is the weight of the new limit against the
	// current one; 0 means 1, no smoothing.
	Smoothing float64
	// ProbeMultiplier sets how often rttNoLoad is measured afresh, in
	// multiples of the limit, in samples; 0 means 30.
	ProbeMultiplier int

	win        window
	rttNoLoad  time.Duration
	probeCount int
	jitter     float64
	rng        rand.PCG
	seeded     bool
}

func (v *Vegas) check() error {
	switch {
	case v.Alpha < 0 || v.Beta < 0:
		return fmt.Errorf("Vegas.Alpha %d and Beta %d must not be negative", v.Alpha, v.Beta)
	case v.Alpha != 0 && v.Beta != 0 && v.Alpha > v.Beta:
		return fmt.Errorf("Vegas.Alpha %d is above Beta %d", v.Alpha, v.Beta)
	case v.Smoothing < 0 || v.Smoothing > 1:
		return fmt.Errorf("Vegas.Smoothing %v is outside (0, 1]", v.Smoothing)
	case v.ProbeMultiplier < 0:
		return fmt.Errorf("Vegas.ProbeMultiplier %d is negative", v.ProbeMultiplier)
	}
	return nil
}

// Next implements Controller.
func (v *Vegas) Next(limit float64, s Sample) float64 {
	if !v.seeded {
		// Seeded from the first sample's time, so that limiters started
		// apart probe apart, and a run in fake time is reproducible.
		v.rng.Seed(uint64(s.Start.UnixNano()), 0x9e3779b97f4a7c15)
		v.seeded = true
		v.resetProbe()
	}
	v.probeCount++
	if v.jitter*float64(orDefaultInt(v.ProbeMultiplier, 30))*limit <= float64(v.probeCount) {
		v.resetProbe()
		v.rttNoLoad = s.RTT
		v.win.restart(s.End())
		return limit
	}
	if !s.Dropped && s.RTT > 0 && (v.rttNoLoad == 0 || s.RTT < v.rttNoLoad) {
		v.rttNoLoad = s.RTT
	}
	s, ok := v.win.add(limit, s)
	if !ok || v.rttNoLoad == 0 {
		return limit
	}

	lg := log10Floor(limit)
	var next float64
	switch queue := math.Ceil(limit * (1 - float64(v.rttNoLoad)/float64(s.RTT))); {
	case s.Dropped:
		next = limit - lg
	case float64(s.InFlight)*2 < limit:
		return limit // application-limited: the RTT says nothing about the limit
	case queue <= lg:
		next = limit + float64(orDefaultInt(v.Beta, int(6*lg)))
	case queue < float64(orDefaultInt(v.Alpha, int(3*lg))):
		next = limit + lg
	case queue > float64(orDefaultInt(v.Beta, int(6*lg))):
		next = limit - lg
	default:
		return limit
	}
	sm := orDefault(v.Smoothing, 1)
	return (1-sm)*limit + sm*math.Max(1, next)
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
