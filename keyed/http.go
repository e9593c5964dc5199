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

	"github.com/atomicsem/atomicsem/overload"
)

// Middleware returns HTTP middleware that spends one credit of l per
// request, from the bucket of the request's key: the client's address by
// default (see WithTrustedHeader and WithIPv6Prefix), or what WithKeyFunc
// says.
//
// Every response carries the httpapi working group's RateLimit-Policy
// field, and every response it passes on or refuses for the key's credit
// the RateLimit field for the key's bucket:
//
//	RateLimit-Policy: "default";q=BURST;w=SECONDS
//	RateLimit: "default";r=BALANCE;t=SECONDS
//
// where q is the burst, w the seconds a bucket takes to fill from empty
// (rounded up), and r the credit left to the key. On a request passed on,
// t is the seconds until the key's bucket is full again. A request whose
// key has no credit for it is answered 429 Too Many Requests, and there t
// names the same moment as Retry-After, the seconds until the request
// would be allowed: until accrual covers it after the credit that the
// key's waiting Spend and Acquire calls are owed, counting credit
// reserved from the key as spent (Decision.RetryIn). Both are rounded up,
// so a refusal always names a wait of at least one second; at a rate of
// zero, where accrual never covers it, both are left out. A request whose
// key is new while l's table is full (ErrTooManyKeys) is answered 503
// Service Unavailable with a Retry-After of one second and no RateLimit
// field, as the key has no bucket to describe. WithRejection replaces
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
// the server trusts, instead of from the connection's remote address.
//
// The field's lines are one comma-separated list, as RFC 9110 (section
// 5.3) makes repeated lines of a field, and the last element of the list
// is taken, empty elements skipped: the one the trusted proxy added, after
// whatever the client sent, whether the proxy appended it to the client's
// line (X-Forwarded-For: client, proxy-seen) or added a line of its own,
// as HAProxy's option forwardfor does. An element is an address, IPv4 or
// IPv6, with or without a port, IPv6 with or without brackets.
//
// If name is Forwarded (RFC 7239), the element taken is the last of the
// combined list, and the address is the value of its for parameter
// (matched without regard to case, its value quoted or not):
//
//	Forwarded: for=192.0.2.60;proto=https, for="[2001:db8:cafe::17]:4711"
//
// limits 2001:db8:cafe::17. A request without the field, or whose last
// element holds no address (an obfuscated identifier such as for=_hidden,
// for=unknown, an element without for), is limited by its remote address:
// the proxy's, which no client can choose.
//
// Trust only a field that the proxy always sets or appends to: a client
// that reaches the server around the proxy picks its own key.
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
	// classOpts are WithClassOptions', for GatesMiddleware.
	classOpts []overload.HTTPOption
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
	if err != nil {
		hdr.Set("Retry-After", "1")
		m.refuse(w, r, err, http.StatusServiceUnavailable)
		return
	}
	// t is when the bucket is full on a request passed on, and when the
	// request would be allowed on a refusal, the moment Retry-After names.
	t := d.FullIn
	if !d.Spent {
		t = d.RetryIn
	}
	var buf [64]byte
	rl := append(append(buf[:0], m.name...), ";r="...)
	rl = strconv.AppendInt(rl, d.Balance, 10)
	if t >= 0 {
		rl = appendSeconds(append(rl, ";t="...), t)
	}
	hdr.Set("RateLimit", string(rl))
	if !d.Spent {
		if t >= 0 {
			hdr.Set("Retry-After", seconds(t))
		}
		m.refuse(w, r, ErrLimited, http.StatusTooManyRequests)
		return
	}
	h.next.ServeHTTP(w, r)
}

// ErrLimited is what Rejected reports for a request that Middleware refused
// because its key had no credit left.
var ErrLimited = errors.New("keyed: rate limited")

type rejectedKey struct{}

// Rejected returns, inside a handler given to WithRejection, why
// Middleware refused r: ErrLimited or ErrTooManyKeys; or why
// GatesMiddleware did: what Gates.Acquire returned. It returns nil for a
// request Middleware did not refuse. It is a run-time error to pass a nil
// request; the panic's message begins "keyed: ".
func Rejected(r *http.Request) error {
	if r == nil {
		panic("keyed: Rejected(nil)")
	}
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
		if lines := r.Header[m.header]; len(lines) > 0 {
			if a, ok := forwardedAddr(lines, m.header == "Forwarded"); ok {
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

// forwardedAddr returns the address in the last non-empty element of the
// field lines, taken as one list, or false if it holds none. With rfc7239
// the element is a Forwarded element, whose for parameter holds the
// address.
func forwardedAddr(lines []string, rfc7239 bool) (netip.Addr, bool) {
	for i := len(lines) - 1; i >= 0; i-- {
		elem, ok := lastElement(lines[i])
		if !ok {
			continue // a line of empty elements adds nothing to the list
		}
		if rfc7239 {
			elem = forParam(elem)
		}
		return parseAddr(elem)
	}
	return netip.Addr{}, false
}

// lastElement returns the last non-empty element of a comma-separated
// list, trimmed, and false if every element is empty. Commas inside a
// quoted string do not separate elements (RFC 9110, section 5.6.4).
func lastElement(line string) (string, bool) {
	last := ""
	for {
		i := nextSep(line, ',')
		if e := strings.TrimSpace(line[:i]); e != "" {
			last = e
		}
		if i == len(line) {
			return last, last != ""
		}
		line = line[i+1:]
	}
}

// forParam returns the value of the for parameter of a Forwarded element
// (pairs name=value separated by semicolons, value a token or a quoted
// string), unquoted, or "" if it has none.
func forParam(elem string) string {
	for {
		i := nextSep(elem, ';')
		name, value, ok := strings.Cut(elem[:i], "=")
		if ok && strings.EqualFold(strings.TrimSpace(name), "for") {
			return unquote(strings.TrimSpace(value))
		}
		if i == len(elem) {
			return ""
		}
		elem = elem[i+1:]
	}
}

// nextSep returns the index of the first sep in s outside a quoted string,
// or len(s) if there is none.
func nextSep(s string, sep byte) int {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++ // the escaped character
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			return i
		}
	}
	return len(s)
}

// unquote returns a quoted string's content with its escapes undone, or s
// itself if it is not quoted.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	s = s[1 : len(s)-1]
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
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
