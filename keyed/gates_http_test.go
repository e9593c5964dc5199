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

// TestGatesMiddlewareOnTheWire runs the middleware in a real server on
// loopback: one tenant's sheddable requests wait at their class's ceiling
// while its critical request and another tenant's requests are served.
func TestGatesMiddlewareOnTheWire(t *testing.T) {
	s := keyed.MustNewGates(2, twoClasses) // per tenant: critical 1 reserved, sheddable 1 at most
	hold := make(chan struct{})
	srv := httptest.NewServer(keyed.GatesMiddleware(s, keyed.WithKeyFunc(tenantKey))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				<-hold
			}
		})))
	defer srv.Close()
	send := func(path, tenant, class string) chan int {
		done := make(chan int, 1)
		go func() {
			r, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			if err != nil {
				done <- -1
				return
			}
			r.Header.Set("X-Tenant", tenant)
			r.Header.Set(overload.DefaultClassHeader, class)
			resp, err := srv.Client().Do(r)
			if err != nil {
				done <- -1
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		return done
	}
	// waitFor polls the server's own record until cond holds, for at most
	// ten seconds (a loaded machine may be slow to deliver a request).
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			require.True(t, time.Now().Before(deadline), "never: %s", what)
			time.Sleep(time.Millisecond)
		}
	}
	stats := func(tenant string) overload.Stats { st, _ := s.KeyStats(tenant); return st }
	// status waits for an answer for at most ten seconds.
	status := func(done chan int) int {
		select {
		case code := <-done:
			return code
		case <-time.After(10 * time.Second):
			return 0
		}
	}

	first := send("/hold", "acme", "sheddable")
	waitFor("acme's first sheddable request holds its permit", func() bool { return stats("acme").Classes[1].Held == 1 })
	second := send("/hold", "acme", "sheddable")
	waitFor("acme's second sheddable request waits", func() bool { return stats("acme").Waiters == 1 })
	critical := send("/", "acme", "critical")
	other := send("/", "globex", "sheddable")
	defer close(hold) // on a failure too, so that the server can close
	require.Equal(t, http.StatusOK, status(critical), "acme's critical request, within its reserve")
	require.Equal(t, http.StatusOK, status(other), "another tenant")
	hold <- struct{}{}
	hold <- struct{}{}
	require.Equal(t, http.StatusOK, status(first))
	require.Equal(t, http.StatusOK, status(second))
	waitFor("every permit back", func() bool { return stats("acme").Held == 0 })
}
