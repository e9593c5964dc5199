package keyed_test

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/keyed"
)

func serve(h http.Handler, remote string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

var ok200 = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

func TestMiddlewareLimitsByClientAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := keyed.NewLimiter(0.5, 2)
		require.NoError(t, err)
		h := keyed.Middleware(l)(ok200)

		w := serve(h, "192.0.2.1:1000")
		require.Equal(t, http.StatusOK, w.Code)
		require.Equal(t, `"default";q=2;w=4`, w.Header().Get("RateLimit-Policy"))
		require.Equal(t, `"default";r=1;t=2`, w.Header().Get("RateLimit"))
		w = serve(h, "192.0.2.1:2000")
		require.Equal(t, http.StatusOK, w.Code, "another port of the same address shares the key")
		require.Equal(t, `"default";r=0;t=4`, w.Header().Get("RateLimit"))

		w = serve(h, "192.0.2.1:3000")
		require.Equal(t, http.StatusTooManyRequests, w.Code)
		require.Equal(t, "2", w.Header().Get("Retry-After"))
		require.Equal(t, `"default";r=0;t=2`, w.Header().Get("RateLimit"), "t names the moment Retry-After does")

		require.Equal(t, http.StatusOK, serve(h, "192.0.2.2:1000").Code, "another address has its own key")
		time.Sleep(2 * time.Second)
		require.Equal(t, http.StatusOK, serve(h, "192.0.2.1:3000").Code)
	})
}

func TestMiddlewareGroupsIPv6ByPrefix(t *testing.T) {
	l, err := keyed.NewLimiter(0, 1)
	require.NoError(t, err)
	h := keyed.Middleware(l, keyed.WithIPv6Prefix(64))(ok200)
	require.Equal(t, http.StatusOK, serve(h, "[2001:db8:1:2::1]:443").Code)
	require.Equal(t, http.StatusTooManyRequests, serve(h, "[2001:db8:1:2:ffff::9]:443").Code, "same /64")
	require.Equal(t, http.StatusOK, serve(h, "[2001:db8:1:3::1]:443").Code, "another /64")
	require.Equal(t, http.StatusOK, serve(h, "[::ffff:192.0.2.7]:80").Code, "IPv4 mapped is IPv4")
	require.Equal(t, http.StatusTooManyRequests, serve(h, "192.0.2.7:81").Code)

	whole := keyed.Middleware(l)(ok200)
	require.Equal(t, http.StatusOK, serve(whole, "[2001:db8:9::1]:443").Code)
	require.Equal(t, http.StatusOK, serve(whole, "[2001:db8:9::2]:443").Code, "whole addresses without the option")
}

func TestMiddlewareTrustedHeader(t *testing.T) {
	l, err := keyed.NewLimiter(0, 1)
	require.NoError(t, err)
	h := keyed.Middleware(l, keyed.WithTrustedHeader("x-forwarded-for"))(ok200)
	require.Equal(t, http.StatusOK, serve(h, "10.0.0.1:1", "X-Forwarded-For", "203.0.113.9, 198.51.100.1").Code)
	require.Equal(t, http.StatusTooManyRequests,
		serve(h, "10.0.0.2:1", "X-Forwarded-For", "203.0.113.10, 198.51.100.1").Code,
		"the last address, set by the trusted proxy, is the key")
	require.Equal(t, http.StatusOK, serve(h, "10.0.0.1:1").Code, "without the field, the remote address")
	require.Equal(t, http.StatusTooManyRequests, serve(h, "10.0.0.1:2", "X-Forwarded-For", "junk").Code,
		"a field without an address falls back to the remote address")
}

func TestMiddlewareTooManyKeysAndRejection(t *testing.T) {
	l, err := keyed.NewLimiter(0, 1, keyed.WithMaxKeys(1))
	require.NoError(t, err)
	h := keyed.Middleware(l)(ok200)
	require.Equal(t, http.StatusOK, serve(h, "192.0.2.1:1").Code)
	w := serve(h, "192.0.2.2:1")
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	require.Equal(t, `"default";q=1`, w.Header().Get("RateLimit-Policy"))
	require.NotContains(t, w.Header(), "Ratelimit", "a key refused at the cap has no bucket to describe")

	var why []error
	l, err = keyed.NewLimiter(0, 1, keyed.WithMaxKeys(1))
	require.NoError(t, err)
	h = keyed.Middleware(l, keyed.WithPolicyName(`per "client"`), keyed.WithKeyFunc(func(r *http.Request) string {
		return r.Header.Get("Tenant")
	}), keyed.WithRejection(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		why = append(why, keyed.Rejected(r))
		w.WriteHeader(http.StatusTeapot)
	})))(ok200)
	w = serve(h, "192.0.2.1:1", "Tenant", "t1")
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, `"per \"client\"";q=1`, w.Header().Get("RateLimit-Policy"), "no window at rate 0")
	require.Equal(t, http.StatusTeapot, serve(h, "192.0.2.9:1", "Tenant", "t1").Code)
	require.Equal(t, http.StatusTeapot, serve(h, "192.0.2.1:1", "Tenant", "other").Code)
	require.Len(t, why, 2)
	require.ErrorIs(t, why[0], keyed.ErrLimited)
	require.ErrorIs(t, why[1], keyed.ErrTooManyKeys)
}

// flushHijacker is a ResponseWriter with two of the optional interfaces.
type flushHijacker struct {
	*httptest.ResponseRecorder
}

func (flushHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, errors.New("not a connection")
}

func TestMiddlewareKeepsOptionalInterfaces(t *testing.T) {
	l, err := keyed.NewLimiter(1, 1)
	require.NoError(t, err)
	var got http.ResponseWriter
	h := keyed.Middleware(l)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { got = w }))
	w := flushHijacker{httptest.NewRecorder()}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	h.ServeHTTP(w, r)
	require.Equal(t, http.ResponseWriter(w), got, "the handler gets the writer itself")
	_, flusher := got.(http.Flusher)
	_, hijacker := got.(http.Hijacker)
	require.True(t, flusher && hijacker)
}
