package adaptive

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// ErrLimited is returned by Transport.RoundTrip when it sheds a request
// because the limit is reached.
var ErrLimited = errors.New("adaptive: concurrency limit reached")

// Handler returns a handler that serves each request with next while lim
// admits it, and sheds it when lim has no free slot: by default with 503
// Service Unavailable and a Retry-After of one second, or with the
// handler given by WithRejection.
//
// The permit ends when next returns: Dropped if next answered 429 Too Many
// Requests or 503 Service Unavailable (the overload of something downstream
// passed on), Ignored if the client went away first (the request's context
// is cancelled), Success otherwise; WithClassifier replaces this rule.
func Handler(lim *Limiter, next http.Handler, opts ...HandlerOption) http.Handler {
	h := &handler{lim: lim, next: next, reject: http.HandlerFunc(unavailable), classify: classifyServer}
	for _, opt := range opts {
		opt(h)
	}
	return h
}

// A HandlerOption configures Handler.
type HandlerOption func(*handler)

// WithRejection makes Handler answer shed requests with reject.
func WithRejection(reject http.Handler) HandlerOption {
	return func(h *handler) { h.reject = reject }
}

// WithClassifier makes Handler end each permit with classify's verdict on
// the request and the status next answered with (200 if it wrote none).
func WithClassifier(classify func(r *http.Request, status int) Outcome) HandlerOption {
	return func(h *handler) { h.classify = classify }
}

type handler struct {
	lim      *Limiter
	next     http.Handler
	reject   http.Handler
	classify func(*http.Request, int) Outcome
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p Permit
	if !h.lim.TryAcquire(&p) {
		h.reject.ServeHTTP(w, r)
		return
	}
	sw := statusWriter{ResponseWriter: w}
	ended := false
	defer func() {
		if !ended {
			p.Ignored() // next panicked: no verdict on load
		}
	}()
	h.next.ServeHTTP(&sw, r)
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	ended = true
	p.End(h.classify(r, status))
}

// classifyServer is Handler's default verdict.
func classifyServer(r *http.Request, status int) Outcome {
	switch {
	case r.Context().Err() != nil:
		return Ignored
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		return Dropped
	}
	return Succeeded
}

// unavailable is Handler's default answer to a shed request.
func unavailable(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "service overloaded, retry later", http.StatusServiceUnavailable)
}

// statusWriter records the status a handler writes. Unwrap lets
// http.ResponseController reach the writer's other interfaces (Flusher,
// Hijacker and so on).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Transport is an http.RoundTripper that limits the requests in flight
// through Base with Limiter, for a client that adapts to a server's
// capacity. A request holds its permit until its response body is read to
// the end or closed (or until RoundTrip fails).
//
// When the limit is reached, RoundTrip returns ErrLimited at once, or with
// Wait set waits for a slot until the request's context is done and then
// returns the context's error.
//
// The permit ends Dropped for a 429 Too Many Requests or 503 Service
// Unavailable response and for an error that is a timeout (the request's
// deadline, or a net.Error whose Timeout is true), Ignored for any other
// error (the request's context cancelled, say), and Success otherwise;
// Classify replaces this rule.
//
// A Transport must have a Limiter; its other fields may be left zero.
type Transport struct {
	Limiter *Limiter
	// Base makes the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Wait makes RoundTrip wait for a slot instead of returning
	// ErrLimited.
	Wait bool
	// Classify, if not nil, decides each outcome: from the response, or
	// from the error when Base returned one or reading the body failed
	// (resp is then nil).
	Classify func(resp *http.Response, err error) Outcome
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	p := new(Permit)
	if t.Wait {
		if err := t.Limiter.Acquire(req.Context(), p); err != nil {
			return nil, err
		}
	} else if !t.Limiter.TryAcquire(p) {
		return nil, ErrLimited
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	classify := t.Classify
	if classify == nil {
		classify = classifyClient
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		p.End(classify(nil, err))
		return nil, err
	}
	resp.Body = &permitBody{ReadCloser: resp.Body, p: p, outcome: classify(resp, nil), classify: classify}
	return resp, nil
}

// classifyClient is Transport's default verdict.
func classifyClient(resp *http.Response, err error) Outcome {
	if err != nil {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			return Dropped
		}
		return Ignored
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		return Dropped
	}
	return Succeeded
}

// permitBody ends its permit when the body is read to the end, fails, or
// is closed, whichever comes first. The transport may close a body from
// another goroutine while it is read, so the end is claimed atomically.
type permitBody struct {
	io.ReadCloser
	p        *Permit
	outcome  Outcome
	classify func(*http.Response, error) Outcome
	done     atomic.Bool
}

func (b *permitBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	switch {
	case err == io.EOF:
		b.end(b.outcome)
	case err != nil:
		b.end(b.classify(nil, err))
	}
	return n, err
}

func (b *permitBody) Close() error {
	err := b.ReadCloser.Close()
	b.end(b.outcome)
	return err
}

func (b *permitBody) end(o Outcome) {
	if b.done.CompareAndSwap(false, true) {
		b.p.End(o)
	}
}
