package adaptive

import (
	"time"
)

// AIMD is the loss-based controller of Netflix's concurrency-limits
// (AIMDLimit): additive increase, multiplicative decrease.
//
// A window of samples (about one round trip's worth; see the package
// documentation) with a drop
// in it, or whose mean RTT exceeds Timeout, multiplies the limit by Backoff.
// Any other window raises the limit by one, provided at least half the
// limit was in flight (a limit that is not being used is not raised: the
// application, not the service, is the bottleneck).
//
// Netflix's AIMDLimit applies the rule to every sample. This one applies it
// once per window of the samples of requests admitted since the last
// decision, as TCP does once per round trip: a burst of timeouts is one
// congestion event and backs off once, instead of multiplying the limit by
// Backoff once per timeout down to its minimum, and the increase is one
// per round trip, so the limit does not double in the round trip it takes
// the first queued request to report.
//
// Two rules come from TCP's congestion control rather than Netflix's. Until
// the first congestion event, the limit doubles each window instead of
// growing by one (TCP's slow start), so that a limit that starts far below
// the capacity reaches it in a few round trips, not in as many round trips
// as the capacity is large; the slow start also ends, without a backoff,
// at the first window whose mean RTT exceeds the lowest of the slow start
// by an eighth, as TCP CUBIC's HyStart ends it, so that the doubling stops
// as a queue starts to form rather than once it is deep enough to drop. As
// many drops in a row as the limit admits, nothing completing among them,
// take the limit to its minimum at once (as TCP's retransmission timeout
// takes the window to one segment): the service is failing whatever the
// limit, and backing off by Backoff a window would take dozens of windows,
// each as long as the requests take to fail. Fewer drops in a row are a
// congestion event like any other: a window of an overloaded service can
// hold only drops, as the requests its queue times out end before those
// it serves. After such a failure the limit doubles each window, while no
// congestion shows, up to half what it was before (TCP's slow start after
// a timeout, up to half the old window), and grows by one from there: the
// service that comes back is most often the one that failed.
//
// LatencyBound, the latency past which a request that ends Inconclusive
// counts as Dropped, is four times Timeout, or without a Timeout four
// times the lowest mean RTT of a window without drops.
//
// AIMD reacts only to drops and to RTTs above Timeout, so it settles where
// the mean RTT reaches Timeout: at a queue that makes a request wait
// Timeout less its own latency. For a service of C workers whose requests
// take L without a queue, that is a limit of about C × Timeout / L. Set
// Timeout a tenth above L: the limit settles about a tenth above the
// capacity, as Gradient2's does, and the queue is short enough that
// clients who cancel, which make the service turn requests over faster
// and so lengthen the queue a given wait takes, move the limit little.
// L is the latency of the typical request. Where requests differ widely
// (a cache in front of the service), it is the fast ones': a window is
// decided by the requests that end first, and a request many times slower
// than most ends after the window it was admitted in has been decided, so
// it counts in none. A Timeout set for the slow requests would keep a
// queue that makes the fast ones wait as long.
//
// Set the fields before passing the AIMD to New; an AIMD serves one Limiter.
// The zero value uses the defaults.
type AIMD struct {
	// Backoff is the factor in [0.5, 1) a congestion event multiplies the
	// limit by; 0 means 0.9.
	Backoff float64
	// Timeout is the mean RTT above which a window counts as congested,
	// as a drop does; set it a tenth above the latency of a typical request
	// without a queue (see above). 0 means none: only drops count.
	Timeout time.Duration

	win       window
	congested bool          // whether the slow start has ended
	fastest   time.Duration // the lowest mean RTT of a window in the slow start
	lowest    time.Duration // the lowest mean RTT of a window without drops
	resume    resume
}

// Validate returns an error wrapping ErrInvalidController if a field is
// out of its range (NaN included), nil otherwise. New calls it.
func (a *AIMD) Validate() error {
	if a.Backoff != 0 && !(a.Backoff >= 0.5 && a.Backoff < 1) {
		return invalid("AIMD.Backoff %v is outside [0.5, 1)", a.Backoff)
	}
	if a.Timeout < 0 {
		return invalid("AIMD.Timeout %v is negative", a.Timeout)
	}
	return nil
}

// Next implements Controller.
func (a *AIMD) Next(limit float64, s Sample) float64 {
	if !a.win.add(limit, s) {
		return limit
	}
	w := a.win.close(limit, s)
	if !w.dropped && (a.lowest == 0 || w.rtt < a.lowest) {
		a.lowest = w.rtt
	}
	switch {
	case w.failed:
		a.congested = true
		a.resume.fail(w.before)
		return 1 // nothing completed: to the minimum, which the Limiter enforces
	case w.dropped || (a.Timeout > 0 && w.rtt > a.Timeout):
		a.congested = true
		a.resume.stop()
		return limit * orDefault(a.Backoff, 0.9)
	case float64(w.inFlight)*2 < limit:
		return limit // application-limited
	case !a.congested && a.fastest > 0 && w.rtt > a.fastest+a.fastest/8:
		a.congested = true // the RTT has started to rise: the queue is forming
	case !a.congested:
		if a.fastest == 0 || w.rtt < a.fastest {
			a.fastest = w.rtt
		}
		return limit * 2 // slow start
	}
	return a.resume.grow(limit, limit+1)
}

// LatencyBound returns how long a request may last before, if it ends
// Inconclusive, it counts as Dropped: four times Timeout, or without one
// four times the lowest mean RTT of a window that completed every
// request, or 0 before the first (see WithLatencyBound).
func (a *AIMD) LatencyBound() time.Duration {
	if a.Timeout > 0 {
		return boundFactor * a.Timeout
	}
	return boundFactor * a.lowest
}

// orDefault returns v, or def when v is zero.
func orDefault(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}
