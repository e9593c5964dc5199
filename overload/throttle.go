package overload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Defaults of a Throttle, as in the Google SRE book's chapter "Handling
// Overload".
const (
	DefaultThrottleK      = 2
	DefaultThrottleWindow = 2 * time.Minute
)

// throttleBuckets is how many buckets a Throttle's window is counted in:
// the window slides by a twentieth of its length.
const throttleBuckets = 20

// Throttle is client-side adaptive throttling, the rule of the Google SRE
// book ("Handling Overload"): a client that sees its backend reject
// requests for overload rejects a share of its own requests locally, before
// they reach the backend, with probability
//
//	max(0, (requests − K·accepts) / (requests + 1))
//
// where requests counts the requests the client attempted and accepts those
// the backend accepted, both over a sliding window. While the backend
// accepts everything the probability is 0; once it accepts fewer than one
// request in K, the client sends about K times what the backend accepts,
// so that the backend spends little on rejections and learns at once when
// it can take more. K = 2 lets through twice what is accepted; a K closer to
// 1 throttles harder.
//
// Each request calls Allow, and, if the backend accepted it (answered it,
// whatever the answer, other than an overload rejection such as 429, 503 or
// gRPC's RESOURCE_EXHAUSTED), Accepted. The window holds twenty buckets,
// so it slides a twentieth of its length at a time; each count is one CAS,
// without a lock.
//
// A Throttle is safe for concurrent use. Its zero value is not usable;
// make one with NewThrottle.
type Throttle struct {
	k       float64
	bucket  time.Duration // the window's length / throttleBuckets
	epoch   time.Time
	rand    func() float64
	buckets [throttleBuckets]throttleBucket
}

// throttleBucket counts the requests and accepts of one stretch of the
// window. Each counter packs the stretch's number (the time since the
// epoch divided by the bucket's length, in its low 32 bits) above a 32-bit
// count, so that a counter left over from an earlier turn of the ring is
// recognised and restarted in the same CAS that counts.
type throttleBucket struct {
	requests, accepts counter
}

// NewThrottle returns a Throttle with the given K and window; zero means
// the default (DefaultThrottleK, DefaultThrottleWindow). It returns
// ErrInvalidOption for a K below 1 or not finite (below 1 the client would
// reject requests with every one accepted) and for a negative window or one
// shorter than throttleBuckets nanoseconds.
func NewThrottle(k float64, window time.Duration) (*Throttle, error) {
	if k == 0 {
		k = DefaultThrottleK
	}
	if window == 0 {
		window = DefaultThrottleWindow
	}
	if !(k >= 1) || math.IsInf(k, 1) {
		return nil, fmt.Errorf("%w: NewThrottle: K = %v, want a finite K ≥ 1", ErrInvalidOption, k)
	}
	if window < throttleBuckets {
		return nil, fmt.Errorf("%w: NewThrottle: window %v, want at least %dns", ErrInvalidOption, window, throttleBuckets)
	}
	return &Throttle{k: k, bucket: window / throttleBuckets, epoch: time.Now(), rand: rand.Float64}, nil
}

// Allow counts a request and reports whether to send it: false means reject
// it locally, as the backend would have. The decision is random, with the
// probability Probability returned just before the request was counted.
func (t *Throttle) Allow() bool {
	t.valid("Allow")
	period := t.period()
	p := t.probabilityAt(period)
	t.buckets[period%throttleBuckets].requests.count(period)
	return p == 0 || t.rand() >= p
}

// Accepted counts a request that the backend accepted.
func (t *Throttle) Accepted() {
	t.valid("Accepted")
	period := t.period()
	t.buckets[period%throttleBuckets].accepts.count(period)
}

// Probability returns the probability with which Allow rejects a request
// now: max(0, (requests − K·accepts) / (requests + 1)) over the window.
func (t *Throttle) Probability() float64 {
	t.valid("Probability")
	return t.probabilityAt(t.period())
}

// Counts returns the requests and accepts counted over the window.
func (t *Throttle) Counts() (requests, accepts uint64) {
	t.valid("Counts")
	return t.counts(t.period())
}

func (t *Throttle) valid(method string) {
	if t == nil {
		panic("overload: Throttle." + method + " called on a nil *Throttle")
	}
	if t.bucket == 0 {
		panic("overload: Throttle used without NewThrottle (the zero value is not usable)")
	}
}

func (t *Throttle) probabilityAt(period uint64) float64 {
	req, acc := t.counts(period)
	return max(0, (float64(req)-t.k*float64(acc))/(float64(req)+1))
}

// period returns the number of the window's stretch that now falls in.
func (t *Throttle) period() uint64 { return uint64(time.Since(t.epoch) / t.bucket) }

// counts sums the counters of the buckets whose stretch is one of the
// window's last throttleBuckets, the current one included.
func (t *Throttle) counts(period uint64) (requests, accepts uint64) {
	for i := range t.buckets {
		b := &t.buckets[i]
		requests += b.requests.in(period)
		accepts += b.accepts.in(period)
	}
	return requests, accepts
}

// counter is one of a bucket's two counts, packed with the number of the
// stretch it counts: the number in the low 32 bits, the count above.
type counter struct{ v atomic.Uint64 }

const stampBits = 32

// count counts one for the stretch period, restarting the count if it last
// counted an earlier stretch.
func (c *counter) count(period uint64) {
	stamp := period & (1<<stampBits - 1)
	for {
		old := c.v.Load()
		next := stamp | 1<<stampBits
		if old&(1<<stampBits-1) == stamp {
			next = old + 1<<stampBits
		}
		if c.v.CompareAndSwap(old, next) {
			return
		}
	}
}

// in returns the count if its stretch is one of the window's last
// throttleBuckets ending at period, else 0.
func (c *counter) in(period uint64) uint64 {
	packed := c.v.Load()
	age := (period - packed) & (1<<stampBits - 1)
	if packed == 0 || age >= throttleBuckets {
		return 0
	}
	return packed >> stampBits
}
