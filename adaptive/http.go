package adaptive

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/atomicsem/atomicsem/overload"
)

// ErrLimited is returned by Transport.RoundTrip when it sheds a request
// because the limit is reached.
var ErrLimited = errors.New("adaptive: concurrency limit reached")

// Handler returns a handler that serves each request with next while lim
// admits it, and sheds it when lim has no free slot: by default with 503
// Service Unavailable and a Retry-After of one second, or with the
// handler given by WithRejection.
//
// The permit ends when next returns, with the verdict of ClassifyServer
// (see the package documentation's table of outcomes), or of the function
// given by WithClassifier; Ignored if next or the classifier panics, the
// panic going on to the server.
//
// The writer next receives has the optional interfaces of the writer
// Handler was given, and only those: http.Flusher, http.Hijacker,
// io.ReaderFrom, io.StringWriter, http.Pusher and http.CloseNotifier pass
// type assertions exactly when the underlying writer's do.
// http.ResponseController answers as it does on the underlying writer: its
// Flush returns the underlying writer's flush error (a client gone), and it
// reaches SetReadDeadline, SetWriteDeadline and EnableFullDuplex through
// the writer's Unwrap method.
//
// Put Handler inside http.TimeoutHandler, not outside it:
// http.TimeoutHandler(adaptive.Handler(lim, next), d). TimeoutHandler runs
// the handler it wraps in a goroutine of its own and answers 503 at its
// deadline without waiting for that handler to return. Inside it, Handler
// holds the permit for as long as next runs, and the request, ended by the
// server's deadline, counts as Inconclusive. Outside it, the permit would end when
// TimeoutHandler answers while next runs on without one, and the limit
// would no longer bound the handlers running.
//
// With a Limiter made WithGate, a request is admitted for its class: the
// one its context carries (overload.ContextWithClass, set by a middleware
// outside Handler), or else the one its overload.DefaultClassHeader field
// names, which next then finds in the context too. Trust the header only
// where clients cannot set it as they please (see overload.Middleware).
//
// It is a run-time error to pass a nil lim, next or HandlerOption; the
// panic message begins "adaptive: ".
func Handler(lim *Limiter, next http.Handler, opts ...HandlerOption) http.Handler {
	if lim == nil {
		panic("adaptive: Handler: nil lim")
	}
	if next == nil {
		panic("adaptive: Handler: nil next")
	}
	h := &handler{lim: lim, next: next, reject: http.HandlerFunc(unavailable), classify: ClassifyServer}
	for _, opt := range opts {
		if opt == nil {
			panic("adaptive: Handler: nil HandlerOption")
		}
		opt(h)
	}
	return h
}

// A HandlerOption configures Handler.
type HandlerOption func(*handler)

// WithRejection makes Handler answer shed requests with reject. It is a
// run-time error to pass a nil reject.
func WithRejection(reject http.Handler) HandlerOption {
	if reject == nil {
		panic("adaptive: WithRejection: nil reject")
	}
	return func(h *handler) { h.reject = reject }
}

// WithClassifier makes Handler end each permit with classify's verdict on
// the request and the status next answered with (200 if it wrote none),
// in place of ClassifyServer, which classify may call for the cases it
// leaves alone. It is a run-time error to pass a nil classify.
func WithClassifier(classify func(r *http.Request, status int) Outcome) HandlerOption {
	if classify == nil {
		panic("adaptive: WithClassifier: nil classify")
	}
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
	r, ok := h.lim.tryAcquireRequest(r, &p)
	if !ok {
		h.reject.ServeHTTP(w, r)
		return
	}
	// Ignored stands until the classifier's verdict replaces it, so that a
	// panic in next or in the classifier frees the slot too; the panic goes
	// on to the server.
	o := Ignored
	defer func() { p.End(o) }()
	ww, sw := newWriter(w)
	h.next.ServeHTTP(ww, r)
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	o = h.classify(r, status)
}

// ClassifyServer is Handler's default verdict on a request that next
// served, given the status it answered with (200 if it wrote none), in the
// order of these rules:
//
//   - the request's context ended (the client went away, or a deadline
//     passed, http.TimeoutHandler's for one), whatever next answered:
//     Inconclusive. An answer given after the deadline comes too late to
//     be a success; a client that leaves, or a deadline shorter than the
//     service's latency, says nothing about load by itself; and a request
//     that waited past the limiter's latency bound before either counts
//     as a drop (see WithLatencyBound);
//   - 429 Too Many Requests, 503 Service Unavailable or 504 Gateway
//     Timeout (the overload of something downstream, passed on): Dropped;
//   - any other 5xx: Inconclusive. A server that fails may fail at once,
//     and the time of its failures is no sample of its latency;
//   - any other status, 4xx included: Succeeded. The server did the
//     request's work, and its time is a sample of the service's latency.
func ClassifyServer(r *http.Request, status int) Outcome {
	if r.Context().Err() != nil {
		return Inconclusive
	}
	return classifyStatus(status)
}

// classifyStatus is the verdict on a status that Handler and Transport
// share.
func classifyStatus(status int) Outcome {
	switch {
	case status == http.StatusTooManyRequests, status == http.StatusServiceUnavailable, status == http.StatusGatewayTimeout:
		return Dropped
	case status >= 500:
		return Inconclusive
	}
	return Succeeded
}

// unavailable is Handler's default answer to a shed request.
func unavailable(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "service overloaded, retry later", http.StatusServiceUnavailable)
}

// Transport is an http.RoundTripper that limits the requests in flight
// through Base with Limiter, for a client that adapts to a server's
// capacity. A request holds its permit until its response body is read to
// the end or closed (or until RoundTrip fails). A 101 Switching Protocols
// response ends its permit at once, as the end of the upgrade's round
// trip: the connection that follows is no request, and its body, an
// io.ReadWriteCloser, is returned as Base gave it.
//
// When the limit is reached, RoundTrip returns ErrLimited at once, or with
// Wait set waits for a slot until the request's context is done and then
// returns the context's error.
//
// Before the Limiter, a Transport backs off as the server asks (see
// RoundTrip): while a Retry-After it honours runs, and for the share of
// requests its Throttle rejects, RoundTrip fails at once, without a permit
// and without the network, with errors that match ErrLimited. It carries
// the class of a request whose context has one to the server, in the
// ClassHeader field.
//
// The permit ends with the verdict of ClassifyClient (see the package
// documentation's table of outcomes), or of Classify; Ignored if Base,
// Classify or the body's Close panics, the panic going on to the caller.
// A response with a nil Body, which http.Client replaces with an empty
// one, ends its permit at once.
//
// A Transport must have a Limiter; its other fields may be left zero. It
// must not be copied after first use, as it keeps the Retry-After it
// honours. It is a run-time error to call RoundTrip on a nil Transport or
// one without a Limiter, or with a nil request; the panic message begins
// "adaptive: ", and no permit is taken.
type Transport struct {
	Limiter *Limiter
	// Base makes the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Wait makes RoundTrip wait for a slot instead of returning
	// ErrLimited.
	Wait bool
	// Classify, if not nil, decides each outcome in place of
	// ClassifyClient: from the response, or from the error when Base
	// returned one or reading the body failed (resp is then nil).
	Classify func(resp *http.Response, err error) Outcome
	// Throttle, if not nil, rejects requests locally, before the Limiter,
	// in the share the server has been rejecting them (overload.Throttle,
	// the Google SRE rule).
	Throttle *overload.Throttle
	// MaxRetryAfter, if positive, makes RoundTrip honour the Retry-After
	// of a 429 or 503 response for at most MaxRetryAfter; zero ignores
	// Retry-After.
	MaxRetryAfter time.Duration
	// ClassHeader names the header field that carries the class of a
	// request whose context has one (overload.ContextWithClass); empty
	// means overload.DefaultClassHeader.
	ClassHeader string

	// retryUntil is when the last honoured Retry-After ends, in Unix
	// nanoseconds; 0 if none.
	retryUntil atomic.Int64
}

// RoundTrip implements http.RoundTripper.
//
// Before it takes a permit, RoundTrip refuses a request at once, without
// the network: with a *RetryAfterError while a Retry-After runs (with
// MaxRetryAfter set, a 429 or 503 whose Retry-After names a number of
// seconds or an HTTP date makes every request fail until then, or for
// MaxRetryAfter if that ends first, the later end of two standing), and
// with ErrThrottled when Throttle rejects it. Both match ErrLimited. The
// Throttle counts each request it lets through, and as accepted each
// answer but a 429 or 503, and each round trip ended by the request's own
// context; any other error of Base counts as a rejection.
//
// A request whose context carries a class (overload.ContextWithClass), and
// which has no ClassHeader field of its own, is sent with the class in
// that field, on a copy: the caller's request is not changed.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t == nil {
		panic("adaptive: RoundTrip on a nil *Transport")
	}
	if t.Limiter == nil {
		panic("adaptive: Transport.Limiter is nil")
	}
	if req == nil {
		panic("adaptive: Transport.RoundTrip: nil Request")
	}
	sent, err := t.before(req)
	if err != nil {
		return nil, refused(req, err)
	}
	p := new(Permit)
	if t.Wait {
		if err := t.Limiter.Acquire(req.Context(), p); err != nil {
			return nil, refused(req, err)
		}
	} else if !t.Limiter.TryAcquire(p) {
		return nil, refused(req, ErrLimited)
	}
	return t.roundTrip(sent, p)
}

// refused closes the body of a request that RoundTrip refuses before Base
// sees it, as a RoundTripper must on every error, and returns err.
func refused(req *http.Request, err error) error {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return err
}

// roundTrip makes the request through Base under the live permit p, and
// ends p or hands it to the response's body. Base and the classifier are
// the caller's code: Ignored stands until a verdict replaces it, and p ends
// in a defer unless the body took it, so that a panic in either frees the
// slot too and goes on to the caller.
func (t *Transport) roundTrip(req *http.Request, p *Permit) (*http.Response, error) {
	o, handed := Ignored, false
	defer func() {
		if !handed {
			p.End(o)
		}
	}()
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	classify := t.Classify
	if classify == nil {
		classify = ClassifyClient
	}
	resp, err := base.RoundTrip(req)
	t.after(resp, err)
	switch {
	case err != nil:
		o = classify(nil, err)
		return nil, err
	case resp == nil:
		return nil, nil // a broken Base, which http.Client reports
	case resp.StatusCode == http.StatusSwitchingProtocols, resp.Body == nil:
		// The round trip ends here: a 101's connection is no request, and
		// a nil Body, which http.Client replaces with an empty one, has
		// nothing to hold the permit.
		o = classify(resp, nil)
		return resp, nil
	}
	outcome := classify(resp, nil)
	resp.Body = &permitBody{ReadCloser: resp.Body, p: p, outcome: outcome, classify: classify}
	handed = true
	return resp, nil
}

// ClassifyClient is Transport's default verdict on a response, or on the
// error of a request that got none (resp is then nil), in the order of
// these rules:
//
//   - the request's context ended (context.Canceled: the caller gave up;
//     context.DeadlineExceeded: its deadline passed): Inconclusive, as for
//     ClassifyServer;
//   - any other error (a network timeout, a refused or reset
//     connection): Dropped, as the server did not complete the request;
//   - 429 Too Many Requests, 503 Service Unavailable or 504 Gateway
//     Timeout: Dropped;
//   - any other 5xx: Inconclusive; any other status, 4xx included:
//     Succeeded, as for ClassifyServer.
func ClassifyClient(resp *http.Response, err error) Outcome {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Inconclusive
	case err != nil:
		return Dropped
	}
	return classifyStatus(resp.StatusCode)
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
		b.end(nil)
	case err != nil:
		b.end(err)
	}
	return n, err
}

// Close closes the body and ends the permit, in a defer so that a Close
// of Base's that panics frees the slot too.
func (b *permitBody) Close() error {
	defer b.end(nil)
	return b.ReadCloser.Close()
}

// end ends the permit, unless it has ended: with the response's verdict
// for a nil err, with the classifier's verdict on err otherwise. The end is
// claimed before the classifier runs, and Ignored stands until its verdict
// replaces it, so that a classifier that panics frees the slot too.
func (b *permitBody) end(err error) {
	if !b.done.CompareAndSwap(false, true) {
		return
	}
	if err == nil {
		b.p.End(b.outcome)
		return
	}
	o := Ignored
	defer func() { b.p.End(o) }()
	o = b.classify(nil, err)
}
