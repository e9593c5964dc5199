package adaptive

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/atomicsem/atomicsem/overload"
)

// ErrThrottled is returned by Transport.RoundTrip for a request that its
// Throttle rejected locally. It matches ErrLimited with errors.Is, as
// every request a Transport refuses before the network does.
var ErrThrottled error = refusal("adaptive: request throttled: the server has been rejecting requests")

// refusal is an error of a request refused before the network, which
// matches ErrLimited.
type refusal string

func (r refusal) Error() string { return string(r) }
func (refusal) Unwrap() error   { return ErrLimited }

// RetryAfterError is the error of a request refused because the server
// asked the client to wait (a Retry-After, or gRPC's retry pushback), with
// the time left of the wait. It matches ErrLimited with errors.Is; find it
// with errors.As.
type RetryAfterError struct {
	RetryAfter time.Duration // the wait left when the request was refused
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("adaptive: the server asked for no request for another %v", e.RetryAfter)
}

// Unwrap returns ErrLimited.
func (e *RetryAfterError) Unwrap() error { return ErrLimited }

// before refuses req, or returns the request to send: req itself, or a copy
// with the class header set. It runs before the Limiter: a request refused
// here takes no permit and reaches no server.
//
// The wait a server asked for comes first, and is not counted by the
// Throttle: the client sent nothing, so neither did the server reject it.
// A request the Throttle lets through counts as a request whether or not
// the Limiter then admits it: a Limiter at its limit is the client's own
// measure of the server's overload.
func (t *Transport) before(req *http.Request) (*http.Request, error) {
	if t.MaxRetryAfter > 0 {
		if left := retryLeft(&t.retryUntil, t.MaxRetryAfter); left > 0 {
			return nil, &RetryAfterError{RetryAfter: left}
		}
	}
	if t.Throttle != nil && !t.Throttle.Allow() {
		return nil, ErrThrottled
	}
	if class, ok := overload.ClassFromContext(req.Context()); ok {
		name := t.ClassHeader
		if name == "" {
			name = overload.DefaultClassHeader
		}
		if req.Header.Get(name) == "" {
			// A RoundTripper must not change the caller's request: the
			// header goes on a shallow copy with headers of its own.
			r := new(http.Request)
			*r = *req
			r.Header = req.Header.Clone()
			if r.Header == nil {
				r.Header = make(http.Header)
			}
			r.Header.Set(name, class)
			req = r
		}
	}
	return req, nil
}

// after tells the Throttle of an answer the server accepted, and starts the
// wait a 429 or 503 asks for in its Retry-After. A round trip that failed
// by the request's context (cancelled, or past its deadline) counts as
// accepted: the server rejected nothing, and a client that cancels must
// not throttle itself. Any other failure counts as a rejection, as gRPC's
// Unavailable does.
func (t *Transport) after(resp *http.Response, err error) {
	rejected := false
	switch {
	case err != nil:
		rejected = !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	case resp == nil:
		rejected = true
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusServiceUnavailable:
		rejected = true
		if t.MaxRetryAfter > 0 {
			if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
				retryFor(&t.retryUntil, d, t.MaxRetryAfter)
			}
		}
	}
	if !rejected && t.Throttle != nil {
		t.Throttle.Accepted()
	}
}

// parseRetryAfter returns the wait a Retry-After value asks for from now:
// a number of seconds, or an HTTP date. It reports false for a value that
// is neither, or asks for no wait.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		switch {
		case secs == 0:
			return 0, false
		case secs > uint64(maxWait/time.Second): // ErrRange's secs is the largest uint64
			return maxWait, true
		}
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := at.Sub(now)
	return d, d > 0
}

// maxWait bounds a wait parsed from a server's hint before it is capped by
// the caller's maximum, so that the arithmetic cannot overflow.
const maxWait = 1 << 62

// retryFor makes the wait of d from now, capped at limit, end no earlier
// than it did: of two hints, the later end stands.
func retryFor(until *atomic.Int64, d, limit time.Duration) {
	end := time.Now().UnixNano() + int64(min(d, limit))
	for {
		old := until.Load()
		if old >= end || until.CompareAndSwap(old, end) {
			return
		}
	}
}

// retryLeft returns the time left of the wait that until ends, or 0. A
// wait that seems to last more than limit (the wall clock stepped back
// since it began) is over: the cap bounds every wait.
func retryLeft(until *atomic.Int64, limit time.Duration) time.Duration {
	end := until.Load()
	if end == 0 {
		return 0
	}
	left := time.Duration(end - time.Now().UnixNano())
	if left <= 0 || left > limit {
		return 0
	}
	return left
}
