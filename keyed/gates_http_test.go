package keyed_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/keyed"
	"github.com/atomicsem/atomicsem/overload"
)

func tenantKey(r *http.Request) string { return r.Header.Get("X-Tenant") }

func tenantRequest(tenant, class string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-Tenant", tenant)
	if class != "" {
		r.Header.Set(overload.DefaultClassHeader, class)
	}
	return r
}

// TestGatesMiddlewareAdmitsByKeyAndClass checks that a request is admitted
// through its key's gate, for the class overload.Middleware would give it,
// which the handler finds in its context, and that its permit is held
// while the handler runs.
func TestGatesMiddlewareAdmitsByKeyAndClass(t *testing.T) {
	s := keyed.MustNewGates(2, twoClasses)
	var seen []string
	h := keyed.GatesMiddleware(s, keyed.WithKeyFunc(tenantKey))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := overload.ClassFromContext(r.Context())
		require.True(t, ok)
		seen = append(seen, name)
		st, present := s.KeyStats(tenantKey(r))
		require.True(t, present)
		c, _ := s.Class(name)
		require.Equal(t, int64(1), st.Classes[c].Held, "the request's permit, of its class")
	}))
	for _, class := range []string{"critical", " CRITICAL ", "sheddable", "", "unknown"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, tenantRequest("acme", class))
		require.Equal(t, http.StatusOK, rec.Code)
	}
	require.Equal(t, []string{"critical", "critical", "sheddable", "sheddable", "sheddable"}, seen)
	st, _ := s.KeyStats("acme")
	require.Zero(t, st.Held)

	// overload's options choose the header and the default class.
	seen = nil
	h = keyed.GatesMiddleware(s, keyed.WithKeyFunc(tenantKey),
		keyed.WithClassOptions(overload.WithClassHeader("X-Criticality"), overload.WithDefaultClass("critical")))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			name, _ := overload.ClassFromContext(r.Context())
			seen = append(seen, name)
		}))
	r := tenantRequest("acme", "sheddable") // the default header is not read
	h.ServeHTTP(httptest.NewRecorder(), r)
	r.Header.Set("X-Criticality", "sheddable")
	h.ServeHTTP(httptest.NewRecorder(), r)
	require.Equal(t, []string{"critical", "sheddable"}, seen)
}

// TestGatesMiddlewareRefusesAsOverloadDoes checks that a refused request
// gets the answer overload.Middleware gives, and that WithRejection's
// handlers, keyed's or overload's, learn why.
func TestGatesMiddlewareRefusesAsOverloadDoes(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	s := keyed.MustNewGates(1, twoClasses, keyed.WithMaxKeys(1))
	g := overload.MustNew(1, 1, twoClasses)
	tok, _ := s.TryAcquire("acme", 0, 1)
	defer tok.Release()
	gtok, _ := g.TryAcquire(0, 1)
	defer gtok.Release()

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	want := httptest.NewRecorder()
	overload.Middleware(g)(ok).ServeHTTP(want, tenantRequest("acme", "").WithContext(ctx))
	got := httptest.NewRecorder()
	keyed.GatesMiddleware(s, keyed.WithKeyFunc(tenantKey))(ok).ServeHTTP(got, tenantRequest("acme", "").WithContext(ctx))
	require.Equal(t, http.StatusServiceUnavailable, want.Code)
	require.Equal(t, want.Code, got.Code)
	require.Equal(t, want.Header(), got.Header())
	require.Equal(t, want.Body.String(), got.Body.String())

	// A new key while the table is full.
	got = httptest.NewRecorder()
	keyed.GatesMiddleware(s, keyed.WithKeyFunc(tenantKey))(ok).ServeHTTP(got, tenantRequest("globex", ""))
	require.Equal(t, http.StatusServiceUnavailable, got.Code)
	require.Equal(t, "1", got.Header().Get("Retry-After"))

	var why error
	teapot := func(whyOf func(*http.Request) error) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			why = whyOf(r)
			w.WriteHeader(http.StatusTeapot)
		})
	}
	got = httptest.NewRecorder()
	keyed.GatesMiddleware(s, keyed.WithKeyFunc(tenantKey), keyed.WithRejection(teapot(keyed.Rejected)))(ok).
		ServeHTTP(got, tenantRequest("globex", ""))
	require.Equal(t, http.StatusTeapot, got.Code)
	require.Equal(t, "1", got.Header().Get("Retry-After"))
	require.ErrorIs(t, why, keyed.ErrTooManyKeys)

	got = httptest.NewRecorder()
	keyed.GatesMiddleware(s, keyed.WithKeyFunc(tenantKey), keyed.WithClassOptions(overload.WithRejection(teapot(overload.Rejected))))(ok).
		ServeHTTP(got, tenantRequest("acme", "").WithContext(ctx))
	require.Equal(t, http.StatusTeapot, got.Code)
	require.ErrorIs(t, why, context.DeadlineExceeded)
}

// TestGatesMiddlewareKeysByClientAddress checks the default key: the
// client's address, as Middleware takes it.
func TestGatesMiddlewareKeysByClientAddress(t *testing.T) {
	s := keyed.MustNewGates(1, twoClasses)
	h := keyed.GatesMiddleware(s, keyed.WithIPv6Prefix(64))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "[2001:db8::1]:4711"
	h.ServeHTTP(httptest.NewRecorder(), r)
	_, present := s.KeyStats("2001:db8::/64")
	require.True(t, present)
}

// TestGatesMiddlewarePanicsLeakNoPermit checks that a panic in the key
// function, the class function or the handler reaches the caller and
// leaves no permit taken.
func TestGatesMiddlewarePanicsLeakNoPermit(t *testing.T) {
	s := keyed.MustNewGates(1, twoClasses)
	fine := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	tests := []struct {
		name string
		h    http.Handler
	}{
		{"key function", keyed.GatesMiddleware(s, keyed.WithKeyFunc(func(*http.Request) string { panic("key") }))(fine)},
		{"class function", keyed.GatesMiddleware(s, keyed.WithKeyFunc(tenantKey),
			keyed.WithClassOptions(overload.WithClassFunc(func(*http.Request) string { panic("class") })))(fine)},
		{"handler", keyed.GatesMiddleware(s, keyed.WithKeyFunc(tenantKey))(
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("handler") }))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Panics(t, func() { tt.h.ServeHTTP(httptest.NewRecorder(), tenantRequest("acme", "critical")) })
			st, _ := s.KeyStats("acme")
			require.Zero(t, st.Held, "a permit leaked")
			tok, ok := s.TryAcquire("acme", 1, 1)
			require.True(t, ok, "the key's limit is whole")
			tok.Release()
		})
	}
}
