package adaptive

import (
	"fmt"
	"math"
	"time"
)

// A Controller decides the concurrency limit from the outcomes of finished
// requests. AIMD, Vegas and Gradient2 are the controllers this package
// provides; any type with a Next method can be one.
//
// A Limiter calls Next once for every request that ends in Succeeded or
// Dropped (never for Ignored), with its lock held, so an implementation needs
// no locking of its own as long as it is used by one Limiter only. A
// request that ends Inconclusive reaches Next as Dropped if it lasted
// longer than the latency bound; a controller sets that bound if it has a
// method LatencyBound() time.Duration, which the Limiter calls with the
// same lock held (see WithLatencyBound).
type Controller interface {
	// Next returns the limit to use after sample s, given the current limit.
	// The limit is a real number so that a controller can move it by less
	// than one request at a time; the Limiter clamps the result to its
	// bounds, keeps it as the next call's limit, and enforces its integer
	// part. A result that is not a number leaves the limit unchanged.
	Next(limit float64, s Sample) float64
}

// Sample describes one finished request, as a Controller sees it.
type Sample struct {
	// Start is when the request was admitted.
	Start time.Time
	// RTT is the time from the admission to the end of the request, read
	// from the monotonic clock.
	RTT time.Duration
	// InFlight is the number of requests in flight just after this one was
	// admitted, itself included.
	InFlight int64
	// Limited reports whether the limit turned a request away (refused
	// it, or made it wait) while this one was in flight: whether the
	// limit, rather than the load offered, bounded the requests in
	// flight.
	Limited bool
	// Dropped reports whether the request ended in Dropped: a timeout, an
	// overload error or a rejection from downstream. A controller treats
	// it as a sign of overload; its RTT says little.
	Dropped bool
}

// End returns when the request ended: Start + RTT.
func (s Sample) End() time.Time { return s.Start.Add(s.RTT) }

// bounder is implemented by the package's controllers (and may be by a
// caller's): LatencyBound returns the latency past which a request that
// ends Inconclusive counts as Dropped, or 0 while the controller has no
// measure of the service's latency. The Limiter calls it with its lock
// held, as it calls Next.
type bounder interface {
	LatencyBound() time.Duration
}

// boundFactor is the controllers' latency bound as a multiple of the
// latency a request shows without a queue: far enough above the latencies
// the controllers settle at (a tenth or so above it) and probe at that a
// client who gives up on a healthy service does not count as a drop, and
// close enough that a hang shows before most clients give up.
const boundFactor = 4

// validator is implemented by the package's controllers (and may be by a
// caller's), whose settings New checks before it accepts them.
type validator interface {
	Validate() error
}

// boundsValidator is implemented by the controllers whose settings may
// not work within some bounds of the limit (Vegas), which New checks
// with the Limiter's.
type boundsValidator interface {
	validateWithin(min, max float64) error
}

// invalid returns an error wrapping ErrInvalidController with the reason.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidController}, args...)...)
}

// window gathers the samples a controller of this package decides on: the
// samples of requests admitted since the last decision, until there are half
// a limit's worth (at least one, at most maxWindow). The package
// documentation says why the controllers decide per window.
type window struct {
	since   time.Time // requests admitted earlier are not counted
	n       int
	ok      int           // samples that are not drops
	sum     time.Duration // of the RTTs of those
	highest int64         // the largest InFlight
	limited bool          // whether any sample was Limited
	// run counts the drops in a row, across windows and whenever the
	// requests were admitted, and runFrom is the limit when the run
	// began.
	run     int
	runFrom float64
}

// maxWindow bounds the samples of a window, so that a large limit still
// decides at least every maxWindow samples.
const maxWindow = 100

// summary is what a complete window tells its controller.
type summary struct {
	rtt      time.Duration // the mean RTT of the samples that are not drops; 0 when all are
	inFlight int64         // the largest InFlight
	limited  bool          // whether any sample was Limited
	dropped  bool          // whether any sample was a drop
	// failed reports whether nothing completes: the last samples were as
	// many drops in a row as the limit admits, which closes the window at
	// once; before is then the limit when they began. A window of half a
	// limit's worth of an overloaded service can hold only drops, as the
	// requests that time out in its queue end before those it serves; a
	// limit's worth in a row, with no answer among them, is a service that
	// answers nothing.
	failed bool
	before float64
}

// add counts s and reports whether the window is now complete; close
// then summarises it.
func (w *window) add(limit float64, s Sample) bool {
	switch {
	case !s.Dropped:
		w.run = 0
	case w.run == 0:
		w.run, w.runFrom = 1, limit
	default:
		w.run++
	}
	if w.failing(limit) {
		return true // the service answers nothing: decide now
	}
	if s.Start.Before(w.since) {
		return false
	}
	w.n++
	w.highest = max(w.highest, s.InFlight)
	w.limited = w.limited || s.Limited
	if !s.Dropped {
		w.ok++
		w.sum += s.RTT
	}
	return float64(w.n) >= min(maxWindow, max(1, limit/2))
}

// close returns the summary of a complete window and starts the next at
// the end of last, the sample that completed it. It is outlined from add,
// which most samples leave without completing a window.
func (w *window) close(limit float64, last Sample) summary {
	sum := summary{inFlight: w.highest, limited: w.limited, dropped: w.ok < w.n,
		failed: w.failing(limit), before: w.runFrom}
	if w.ok > 0 {
		sum.rtt = w.sum / time.Duration(w.ok)
	}
	w.restart(last.End())
	return sum
}

// failing reports whether the drops in a row are as many as limit admits:
// whether the service answers nothing.
func (w *window) failing(limit float64) bool {
	return w.run > 0 && float64(w.run) >= math.Ceil(limit)
}

// restart empties the window and counts only requests admitted from t on.
// The run of drops goes on.
func (w *window) restart(t time.Time) { *w = window{since: t, run: w.run, runFrom: w.runFrom} }

// filled reports whether the window's requests filled limit: whether the
// limit turned a request away while one of them was in flight, or as many
// were in flight as the limit allows. A controller raises a limit only
// when it was filled, as TCP raises a window only when the window, not the
// sender, bounded the data in flight (RFC 7661): a limit the requests do
// not reach says nothing about how the service copes with it.
func (s summary) filled(limit float64) bool {
	return s.limited || float64(s.inFlight) >= math.Floor(limit)
}

// resume brings a limit back after a failure, as TCP restarts after a
// retransmission timeout: a window in which nothing completed takes the
// limit to its minimum, and the windows after it, while the service shows
// no congestion, double it up to half of what it was before the failure
// (TCP's slow start up to half the old window), where the controller's
// own growth takes over. A failure that ends most often finds the service
// as it was before; climbing back by the controller's usual steps from the
// minimum would take as many windows as the limit is large.
type resume struct {
	to float64 // the limit to double up to; 0 when none
}

// fail records a window in which nothing completed, at limit.
func (r *resume) fail(limit float64) { r.to = max(r.to, limit/2) }

// grow returns the limit after a window that would raise limit to next:
// twice limit, up to the limit to resume at, while the resumption lasts.
func (r *resume) grow(limit, next float64) float64 {
	if r.to == 0 {
		return next
	}
	next = max(next, min(limit*2, r.to))
	if next >= r.to {
		r.to = 0
	}
	return next
}

// stop ends the resumption: the service showed congestion.
func (r *resume) stop() { r.to = 0 }
