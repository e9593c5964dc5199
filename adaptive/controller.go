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
// no locking of its own as long as it is used by one Limiter only.
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

// validator is implemented by the package's controllers (and may be by a
// caller's), whose settings New checks before it accepts them.
type validator interface {
	Validate() error
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
	failed   bool          // whether every sample was: nothing completed
}

// add counts s and reports whether the window is now complete; close
// then summarises it.
func (w *window) add(limit float64, s Sample) bool {
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
func (w *window) close(last Sample) summary {
	sum := summary{inFlight: w.highest, limited: w.limited, dropped: w.ok < w.n, failed: w.ok == 0}
	if w.ok > 0 {
		sum.rtt = w.sum / time.Duration(w.ok)
	}
	*w = window{since: last.End()}
	return sum
}

// restart empties the window and counts only requests admitted from t on.
func (w *window) restart(t time.Time) { *w = window{since: t} }

// filled reports whether the window's requests filled limit: whether the
// limit turned a request away while one of them was in flight, or as many
// were in flight as the limit allows. A controller raises a limit only
// when it was filled, as TCP raises a window only when the window, not the
// sender, bounded the data in flight (RFC 7661): a limit the requests do
// not reach says nothing about how the service copes with it.
func (s summary) filled(limit float64) bool {
	return s.limited || float64(s.inFlight) >= math.Floor(limit)
}
