package overload

import (
	"context"
	"net/http"
	"strings"
)

// DefaultClassHeader is the request header field the middleware reads a
// request's class from, unless WithClassHeader or WithClassFunc says
// otherwise.
const DefaultClassHeader = "X-Request-Class"

// Middleware returns HTTP middleware that admits each request through g
// for one permit of the request's class: the class named by the request's
// X-Request-Class header field (WithClassHeader names another field) or by
// WithClassFunc's function, compared without regard to case; a request
// with no class, or one g does not have, is of the default class, the
// lowest unless WithDefaultClass says otherwise. The request waits as
// Acquire does, under its own context and g's queue discipline, and holds
// its permit until the handler returns, or panics.
//
// A request that is shed, or whose context ends while it waits, or that
// arrives at a closed gate, is answered 503 Service Unavailable with a
// Retry-After of one second, as adaptive's Handler sheds; WithRejection
// replaces that answer, and Rejected tells it why.
//
// The handler sees the class's name through ClassFromContext, so that the
// calls it makes can carry the class on. The middleware does not wrap the
// http.ResponseWriter, so the handler sees its optional interfaces
// (http.Flusher, http.Hijacker, io.ReaderFrom) as they are.
//
// Trust the header only where the server's clients cannot set it as they
// please (a proxy in front sets it, overwriting what the client sent), or
// compute the class with WithClassFunc: a client that names its own class
// can name the highest.
//
// It is a run-time error to pass a nil Gate or option, or to name a class
// g does not have in WithDefaultClass; the panic's message begins
// "overload: ".
func Middleware(g *Gate, opts ...HTTPOption) func(http.Handler) http.Handler {
	g.valid("Middleware")
	cl := newClassifier(g, "Middleware", opts)
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("overload: Middleware wrapping a nil http.Handler")
		}
		return &gateHandler{g: g, cl: cl, next: next}
	}
}

// A Classifier finds the class of HTTP requests and answers the requests
// refused, exactly as Middleware does, for a middleware that admits
// requests through gates of its own choosing: keyed's GatesMiddleware
// admits each through the gate of its key. Its methods are safe for
// concurrent use.
type Classifier struct{ m middleware }

// NewClassifier returns the Classifier of Middleware(g, opts...): its
// classes are g's, and those of every gate made with the same classes.
//
// It is a run-time error to pass a nil Gate or option, or to name a class
// g does not have in WithDefaultClass; the panic's message begins
// "overload: ".
func NewClassifier(g *Gate, opts ...HTTPOption) *Classifier {
	g.valid("NewClassifier")
	return newClassifier(g, "NewClassifier", opts)
}

func newClassifier(g *Gate, caller string, opts []HTTPOption) *Classifier {
	cl := &Classifier{m: middleware{header: DefaultClassHeader, def: g.lay.k - 1, k: g.lay.k}}
	m := &cl.m
	for c := range m.k {
		m.names[c] = g.classes[c].name
	}
	for _, opt := range opts {
		if opt == nil {
			panic("overload: " + caller + " called with a nil HTTPOption")
		}
		opt(m)
	}
	if m.defName != "" {
		c, ok := g.Class(m.defName)
		if !ok {
			panic("overload: WithDefaultClass(" + m.defName + "): the gate has no such class")
		}
		m.def = c
	}
	return cl
}

// Class returns the class Middleware admits r as, its index and its name:
// the class named by r's class header field or WithClassFunc's function,
// compared without regard to case, or the default class.
func (cl *Classifier) Class(r *http.Request) (class int, name string) {
	m := &cl.m
	if m.classOf != nil {
		name = m.classOf(r)
	} else {
		name = r.Header.Get(m.header)
	}
	name = strings.TrimSpace(name)
	for c := range m.k {
		if cn := m.names[c]; strings.EqualFold(cn, name) {
			return c, cn
		}
	}
	return m.def, m.names[m.def]
}

// Refuse answers r, refused for why, as Middleware answers: a Retry-After
// of one second, then 503 Service Unavailable or WithRejection's handler,
// for which Rejected returns why.
func (cl *Classifier) Refuse(w http.ResponseWriter, r *http.Request, why error) {
	w.Header().Set("Retry-After", "1")
	if cl.m.reject != nil {
		cl.m.reject.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), rejectedKey{}, why)))
		return
	}
	http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
}

// An HTTPOption configures Middleware.
type HTTPOption func(*middleware)

// WithClassHeader makes Middleware read a request's class from the header
// field name instead of X-Request-Class.
func WithClassHeader(name string) HTTPOption {
	name = http.CanonicalHeaderKey(name)
	return func(m *middleware) { m.header = name }
}

// WithClassFunc makes Middleware take a request's class from class(r), a
// class name, instead of from a header field; an empty or unknown name
// means the default class. It is a run-time error to pass a nil function.
func WithClassFunc(class func(r *http.Request) string) HTTPOption {
	if class == nil {
		panic("overload: WithClassFunc(nil)")
	}
	return func(m *middleware) { m.classOf = class }
}

// WithDefaultClass names the class of a request without a class, or with a
// name the gate does not have, instead of the lowest.
func WithDefaultClass(name string) HTTPOption {
	return func(m *middleware) { m.defName = name }
}

// WithRejection makes Middleware answer refused requests with reject
// instead of 503; reject finds why with Rejected. It is a run-time error to
// pass a nil handler.
func WithRejection(reject http.Handler) HTTPOption {
	if reject == nil {
		panic("overload: WithRejection(nil)")
	}
	return func(m *middleware) { m.reject = reject }
}

type middleware struct {
	header  string
	classOf func(*http.Request) string
	def     int
	defName string
	reject  http.Handler
	k       int
	names   [MaxClasses]string
}

type gateHandler struct {
	g    *Gate
	cl   *Classifier
	next http.Handler
}

func (h *gateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, name := h.cl.Class(r)
	tok, err := h.g.Acquire(r.Context(), c, 1)
	if err != nil {
		h.cl.Refuse(w, r, err)
		return
	}
	defer tok.Release()
	h.next.ServeHTTP(w, r.WithContext(ContextWithClass(r.Context(), name)))
}

type rejectedKey struct{}

// Rejected returns, inside a handler given to WithRejection, why Middleware
// refused r: a shed (ErrQueueFull, ErrMaxWait, ErrDropped, ErrDeadline),
// the request context's error, or ErrClosed. It returns nil for a request
// Middleware did not refuse.
func Rejected(r *http.Request) error {
	err, _ := r.Context().Value(rejectedKey{}).(error)
	return err
}

type classKey struct{}

// ContextWithClass returns a copy of ctx that carries the class name, so
// that the calls made on its behalf can carry the class on.
func ContextWithClass(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, classKey{}, name)
}

// ClassFromContext returns the class name ctx carries, and reports whether
// it carries one.
func ClassFromContext(ctx context.Context) (string, bool) {
	name, ok := ctx.Value(classKey{}).(string)
	return name, ok
}
