package keyed

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Middleware returns HTTP middleware that spends one credit of l per
// request, from the bucket of the request's key: the client's address by
// default (see WithTrustedHeader and WithIPv6Prefix), or what WithKeyFunc
// says.
//
// Every response it passes on or refuses carries the httpapi working
// group's rate-limit fields for the key's bucket:
//
//	RateLimit-Policy: "default";q=BURST;w=SECONDS
//	RateLimit: "default";r=BALANCE;t=SECONDS
//
// where q is the burst, w the seconds a bucket takes to fill from empty
// (rounded up), r the credit left to the key, and t the seconds until its
// bucket is full again (rounded up; left out at a rate of zero). A request
// whose key has no credit left is answered 429 Too Many Requests with
// Retry-After, in seconds rounded up, saying when a credit will have
// accrued (left out at a rate of zero); one whose key is new
// while l's table is full (ErrTooManyKeys) is answered 503 Service
// Unavailable with a Retry-After of one second. WithRejection replaces
// either answer; the fields are set before it runs.
//
// The middleware sets header fields before the wrapped handler runs and
// does not wrap the http.ResponseWriter, so the handler sees the writer's
// optional interfaces (http.Flusher, http.Hijacker, io.ReaderFrom) as they
// are.
//
// It is a run-time error to pass a nil Limiter or a nil option; the
// panic's message begins "keyed: ".
func Middleware(l *Limiter, opts ...HTTPOption) func(http.Handler) http.Handler {
	l.valid()
	m := &middleware{l: l, name: `"default"`, ipv6Bits: 128}
	for _, opt := range opts {
		if opt == nil {
			panic("keyed: Middleware with a nil HTTPOption")
		}
		opt(m)
	}
	if m.key == nil {
		m.key = m.clientKey
	}
	m.policy = m.policyField()
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("keyed: Middleware wrapping a nil http.Handler")
		}
		return &limitHandler{m: m, next: next}
	}
}

// An HTTPOption configures Middleware.
type HTTPOption func(*middleware)

// WithKeyFunc makes Middleware limit requests by key(r) instead of the
// client's address. WithTrustedHeader and WithIPv6Prefix have no effect
// beside it. It is a run-time error to pass a nil key; the panic's message
// begins "keyed: ".
func WithKeyFunc(key func(r *http.Request) string) HTTPOption {
	if key == nil {
		panic("keyed: WithKeyFunc(nil)")
	}
	return func(m *middleware) { m.key = key }
}

// WithTrustedHeader makes Middleware take the client's address from the
// request header field name, as set by a proxy in front of the server that
// the server trusts, instead of from the connection's remote address. If
// the field holds a list (as X-Forwarded-For does), the last address is
// taken: the one the trusted proxy saw. A request without the field, or
// whose field does not end in an address, is limited by its remote
// address.
//
// Trust only a field that the proxy always sets, overwriting what the
// client sent: otherwise any client can pick its own key.
func WithTrustedHeader(name string) HTTPOption {
	name = http.CanonicalHeaderKey(name)
	return func(m *middleware) { m.header = name }
}

// WithIPv6Prefix makes Middleware limit IPv6 clients by the first bits of
// their address instead of the whole: WithIPv6Prefix(64) puts every
// address of a /64 network, which one host often holds, under one key.
// It is a run-time error to pass bits outside [0, 128]; the panic's message
// begins "keyed: ".
func WithIPv6Prefix(bits int) HTTPOption {
	if bits < 0 || bits > 128 {
		panic("keyed: WithIPv6Prefix(" + strconv.Itoa(bits) + ") outside [0, 128]")
	}
	return func(m *middleware) { m.ipv6Bits = bits }
}

// WithPolicyName sets the name of the quota policy in the RateLimit-Policy
// and RateLimit fields, "default" otherwise. The name is sent as a
// structured-field string: quotes and backslashes are escaped, and
// characters outside printable ASCII are dropped.
func WithPolicyName(name string) HTTPOption {
	return func(m *middleware) { m.name = sfString(name) }
}

// WithRejection makes Middleware answer refused requests with reject
// instead of 429 or 503. The rate-limit fields and Retry-After are set
// before it runs; reject tells the two cases apart with Rejected(r).
func WithRejection(reject http.Handler) HTTPOption {
	if reject == nil {
		panic("keyed: WithRejection(nil)")
	}
	return func(m *middleware) { m.reject = reject }
}

type middleware struct {
	l        *Limiter
	key      func(*http.Request) string
	header   string
	ipv6Bits int
	name     string // as a structured-field string, quoted
	policy   string // the RateLimit-Policy field, fixed at construction
	reject   http.Handler
}

type limitHandler struct {
	m    *middleware
	next http.Handler
}

func (h *limitHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := h.m
	d, err := m.l.Take(m.key(r), 1)
	hdr := w.Header()
	hdr.Set("RateLimit-Policy", m.policy)
	var buf [64]byte
	rl := append(append(buf[:0], m.name...), ";r="...)
	rl = strconv.AppendInt(rl, d.Balance, 10)
	if d.FullIn >= 0 {
		rl = appendSeconds(append(rl, ";t="...), d.FullIn)
	}
	hdr.Set("RateLimit", string(rl))
	switch {
	case err != nil:
		hdr.Set("Retry-After", "1")
		m.refuse(w, r, err, http.StatusServiceUnavailable)
	case !d.Spent:
		if d.RetryIn >= 0 {
			hdr.Set("Retry-After", seconds(d.RetryIn))
		}
		m.refuse(w, r, ErrLimited, http.StatusTooManyRequests)
	default:
		h.next.ServeHTTP(w, r)
	}
}

// ErrLimited is what Rejected reports for a request that Middleware refused
// because its key had no credit left.
var ErrLimited = errors.New("keyed: rate limited")

type rejectedKey struct{}

// Rejected returns, inside a handler given to WithRejection, why
// Middleware refused r: ErrLimited or ErrTooManyKeys. It returns nil for a
// request Middleware did not refuse.
func Rejected(r *http.Request) error {
	err, _ := r.Context().Value(rejectedKey{}).(error)
	return err
}

func (m *middleware) refuse(w http.ResponseWriter, r *http.Request, why error, status int) {
	if m.reject != nil {
		m.reject.ServeHTTP(w, r.WithContext(contextWith(r, why)))
		return
	}
	http.Error(w, http.StatusText(status), status)
}

// policyField returns the RateLimit-Policy field for l's configuration.
func (m *middleware) policyField() string {
	f := m.name + ";q=" + strconv.FormatInt(m.l.Burst(), 10)
	if w, ok := m.l.fillTime(); ok {
		f += ";w=" + seconds(w)
	}
	return f
}

// clientKey returns the client's address, from the trusted header if
// there is one, else from the connection, with an IPv6 address cut to
// ipv6Bits.
func (m *middleware) clientKey(r *http.Request) string {
	if m.header != "" {
		if v := r.Header.Get(m.header); v != "" {
			if i := strings.LastIndexByte(v, ','); i >= 0 {
				v = v[i+1:]
			}
			if a, ok := parseAddr(strings.TrimSpace(v)); ok {
				return m.keyOf(a)
			}
		}
	}
	if a, ok := parseAddr(r.RemoteAddr); ok {
		if a.Is4() {
			if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil && host != "" && host[0] != '[' && !strings.Contains(host, ":") {
				// An IPv4 address that parsed as one is written in its
				// one canonical form (netip rejects leading zeros), so
				// the key can be the text itself, with no allocation.
				return host
			}
		}
		return m.keyOf(a)
	}
	return r.RemoteAddr
}

func (m *middleware) keyOf(a netip.Addr) string {
	if a.Is6() && m.ipv6Bits < 128 {
		p, _ := a.Prefix(m.ipv6Bits) // bits is within [0, 128]
		return p.String()
	}
	return a.String()
}

// parseAddr parses an address with or without a port, IPv6 in brackets or
// not, and unmaps an IPv4 address written as IPv6.
func parseAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	return netip.Addr{}, false
}

// seconds formats d as whole seconds, rounded up.
func seconds(d time.Duration) string {
	var buf [24]byte
	return string(appendSeconds(buf[:0], d))
}

// appendSeconds appends d as whole seconds, rounded up, to b.
func appendSeconds(b []byte, d time.Duration) []byte {
	if d <= 0 {
		return append(b, '0')
	}
	return strconv.AppendInt(b, int64((d+time.Second-1)/time.Second), 10)
}

// sfString returns s as a structured-field string (RFC 9651): quoted, with
// quotes and backslashes escaped and anything but printable ASCII dropped.
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			continue
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}

func contextWith(r *http.Request, why error) context.Context {
	return context.WithValue(r.Context(), rejectedKey{}, why)
}
