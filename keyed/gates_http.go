package keyed

import (
	"net/http"
	"strings"

	"github.com/atomicsem/atomicsem/overload"
)

// GatesMiddleware returns HTTP middleware that admits each request through
// gs for one permit of the request's class, from the gate of the request's
// key: the client's address by default (see WithTrustedHeader and
// WithIPv6Prefix), or what WithKeyFunc says.
//
// The request's class is found as overload.Middleware finds it, by an
// overload.Classifier made with the options given in WithClassOptions: the
// class named by the request's X-Request-Class header field
// (overload.WithClassHeader names another) or by overload.WithClassFunc's
// function, compared without regard to case, or else the default class,
// the lowest unless overload.WithDefaultClass says otherwise. The request
// waits as Gates.Acquire does, under its own context and its key's queue
// discipline, and holds its permit until the handler returns, or panics.
// The handler sees the class's name through overload.ClassFromContext.
//
// A request refused (a shed, its context ended while it waited, or a new
// key while gs is full: ErrTooManyKeys) is answered as overload.Middleware
// answers: 503 Service Unavailable with a Retry-After of one second, or
// the handler of overload.WithRejection given in WithClassOptions, for
// which overload.Rejected tells why. WithRejection, if given, takes the
// place of either, after the same Retry-After, and Rejected tells why.
// WithPolicyName has no effect.
//
// The middleware does not wrap the http.ResponseWriter, so the handler sees
// its optional interfaces (http.Flusher, http.Hijacker, io.ReaderFrom) as
// they are.
//
// It is a run-time error to pass a nil Gates or a nil option; the panic's
// message begins "keyed: ".
func GatesMiddleware(gs *Gates, opts ...HTTPOption) func(http.Handler) http.Handler {
	gs.valid()
	m := &middleware{ipv6Bits: 128}
	for _, opt := range opts {
		if opt == nil {
			panic("keyed: GatesMiddleware with a nil HTTPOption")
		}
		opt(m)
	}
	if m.key == nil {
		m.key = m.clientKey
	}
	cl := classifier(gs.probe, m.classOpts)
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("keyed: GatesMiddleware wrapping a nil http.Handler")
		}
		return &gatesHandler{gs: gs, m: m, cl: cl, next: next}
	}
}

// WithClassOptions gives GatesMiddleware the options of overload.Middleware
// that find a request's class and answer its refusal (overload's
// WithClassHeader, WithClassFunc, WithDefaultClass, WithRejection). It has
// no effect on Middleware. It is a run-time error to pass a nil option; the
// panic's message begins "keyed: ".
func WithClassOptions(opts ...overload.HTTPOption) HTTPOption {
	for _, opt := range opts {
		if opt == nil {
			panic("keyed: WithClassOptions with a nil overload.HTTPOption")
		}
	}
	opts = append([]overload.HTTPOption(nil), opts...)
	return func(m *middleware) { m.classOpts = append(m.classOpts, opts...) }
}

type gatesHandler struct {
	gs   *Gates
	m    *middleware
	cl   *overload.Classifier
	next http.Handler
}

func (h *gatesHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, name := h.cl.Class(r)
	tok, err := h.gs.Acquire(r.Context(), h.m.key(r), c, 1)
	if err != nil {
		if h.m.reject != nil {
			w.Header().Set("Retry-After", "1")
			h.m.refuse(w, r, err, http.StatusServiceUnavailable)
			return
		}
		h.cl.Refuse(w, r, err)
		return
	}
	defer tok.Release()
	h.next.ServeHTTP(w, r.WithContext(overload.ContextWithClass(r.Context(), name)))
}

// classifier returns overload's Classifier for g and opts, with a panic of
// overload's over an option (a default class g does not have) repeated in
// the package's words.
func classifier(g *overload.Gate, opts []overload.HTTPOption) *overload.Classifier {
	defer func() {
		if v := recover(); v != nil {
			if msg, ok := v.(string); ok {
				panic("keyed: GatesMiddleware: " + strings.TrimPrefix(msg, "overload: "))
			}
			panic(v)
		}
	}()
	return overload.NewClassifier(g, opts...)
}
