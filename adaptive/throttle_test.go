package adaptive_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/overload"
)

// get makes a GET request to url through c, closes the body of its answer,
// and returns the status, or 0 and the error.
func get(t *testing.T, c *http.Client, ctx context.Context, url string) (int, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode, nil
}

func newThrottle(t *testing.T) *overload.Throttle {
	t.Helper()
	th, err := overload.NewThrottle(2, time.Minute)
	require.NoError(t, err)
	return th
}

// TestTransportThrottlesAServerThatRejects sends 300 requests, one after
// another, through a Transport with a Throttle to a loopback server that
// answers every one 503: the Throttle rejects, locally, all but a few
// (about ln 300 ≈ 6 expected: the n-th request is sent with probability
// 1/n), without a permit, and with errors that match ErrThrottled and
// ErrLimited. Without the Throttle all 300 would reach the server.
func TestTransportThrottlesAServerThatRejects(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	lim := newLimiter(t, &recorder{}, 1, 1000, 1000)
	th := newThrottle(t)
	c := &http.Client{Transport: &adaptive.Transport{Limiter: lim, Base: srv.Client().Transport, Throttle: th}}

	const n = 300
	refused := 0
	for range n {
		status, err := get(t, c, context.Background(), srv.URL)
		if err != nil {
			require.ErrorIs(t, err, adaptive.ErrThrottled)
			require.ErrorIs(t, err, adaptive.ErrLimited)
			refused++
			continue
		}
		require.Equal(t, http.StatusServiceUnavailable, status)
	}
	require.Equal(t, int64(n-refused), hits.Load(), "a refused request reaches no server")
	require.Less(t, hits.Load(), int64(n/3), "the throttle rejects most requests locally")
	st := lim.Stats()
	require.Equal(t, uint64(hits.Load()), st.Dropped, "a refused request takes no permit")
	require.Equal(t, uint64(0), st.Rejected+st.Succeeded+st.Ignored)
	req, acc := th.Counts()
	require.Equal(t, uint64(n), req)
	require.Equal(t, uint64(0), acc)
}

// TestTransportCountsWhatTheServerAccepted checks what the Throttle counts
// as accepted: every answer but 429 and 503, and a round trip ended by the
// request's own context; not a network error.
func TestTransportCountsWhatTheServerAccepted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, _ := strconv.Atoi(r.URL.Query().Get("status"))
		w.WriteHeader(status)
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	tests := []struct {
		name     string
		url      string
		ctx      context.Context
		accepted uint64
	}{
		{"200", srv.URL + "?status=200", context.Background(), 1},
		{"404", srv.URL + "?status=404", context.Background(), 1},
		{"500", srv.URL + "?status=500", context.Background(), 1},
		{"504", srv.URL + "?status=504", context.Background(), 1},
		{"429", srv.URL + "?status=429", context.Background(), 0},
		{"503", srv.URL + "?status=503", context.Background(), 0},
		{"connection refused", closed.URL, context.Background(), 0},
		{"cancelled", srv.URL + "?status=200", cancelled, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := newLimiter(t, &recorder{}, 1, 10, 10)
			th := newThrottle(t)
			c := &http.Client{Transport: &adaptive.Transport{Limiter: lim, Base: srv.Client().Transport, Throttle: th}}
			_, _ = get(t, c, tt.ctx, tt.url)
			req, acc := th.Counts()
			require.Equal(t, uint64(1), req)
			require.Equal(t, tt.accepted, acc)
			require.Equal(t, int64(0), lim.Stats().InFlight)
		})
	}
}

// TestTransportHonoursRetryAfter has a loopback server answer its first
// request 503 with a Retry-After of an hour, and every later one 200: the
// next request fails at once, without reaching the server or taking a
// permit, with a *RetryAfterError whose wait is at most MaxRetryAfter, and
// once that wait is over requests reach the server again. Without
// MaxRetryAfter the Retry-After is ignored.
func TestTransportHonoursRetryAfter(t *testing.T) {
	for _, honour := range []bool{true, false} {
		t.Run("honour="+strconv.FormatBool(honour), func(t *testing.T) {
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1) == 1 {
					w.Header().Set("Retry-After", "3600")
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			}))
			defer srv.Close()
			lim := newLimiter(t, &recorder{}, 1, 10, 10)
			tr := &adaptive.Transport{Limiter: lim, Base: srv.Client().Transport}
			const limit = 100 * time.Millisecond
			if honour {
				tr.MaxRetryAfter = limit
			}
			c := &http.Client{Transport: tr}
			status, err := get(t, c, context.Background(), srv.URL)
			require.NoError(t, err)
			require.Equal(t, http.StatusServiceUnavailable, status)

			status, err = get(t, c, context.Background(), srv.URL)
			if !honour {
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, status)
				require.Equal(t, int64(2), hits.Load())
				return
			}
			var ra *adaptive.RetryAfterError
			require.ErrorAs(t, err, &ra)
			require.ErrorIs(t, err, adaptive.ErrLimited)
			require.Greater(t, ra.RetryAfter, time.Duration(0))
			require.LessOrEqual(t, ra.RetryAfter, limit, "the wait is capped")
			require.Equal(t, int64(1), hits.Load(), "the refused request reached no server")
			require.Equal(t, uint64(1), lim.Stats().Dropped, "and took no permit")

			time.Sleep(ra.RetryAfter + time.Millisecond)
			status, err = get(t, c, context.Background(), srv.URL)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, status)
			require.Equal(t, int64(2), hits.Load())
		})
	}
}

// TestTransportReadsRetryAfter checks which answers start a wait, and how
// long: seconds or an HTTP date, on a 429 or 503 only, capped.
func TestTransportReadsRetryAfter(t *testing.T) {
	const limit = time.Hour
	now := time.Now()
	tests := []struct {
		name     string
		status   int
		value    string
		min, max time.Duration // the wait left just after; 0, 0: none
	}{
		{"seconds", 503, "120", 110 * time.Second, 120 * time.Second},
		{"429", 429, "120", 110 * time.Second, 120 * time.Second},
		{"HTTP date", 503, now.Add(30 * time.Minute).UTC().Format(http.TimeFormat), 28 * time.Minute, 30 * time.Minute},
		{"capped", 503, "86400", limit - 10*time.Second, limit},
		{"capped, huge", 503, "99999999999999999999", limit - 10*time.Second, limit},
		{"capped date", 503, now.Add(48 * time.Hour).UTC().Format(http.TimeFormat), limit - 10*time.Second, limit},
		{"past date", 503, now.Add(-time.Hour).UTC().Format(http.TimeFormat), 0, 0},
		{"zero", 503, "0", 0, 0},
		{"negative", 503, "-5", 0, 0},
		{"garbage", 503, "soon", 0, 0},
		{"none", 503, "", 0, 0},
		{"200", 200, "120", 0, 0},
		{"500", 500, "120", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := newLimiter(t, &recorder{}, 1, 10, 10)
			tr := &adaptive.Transport{Limiter: lim, MaxRetryAfter: limit, Base: roundTripper(func(r *http.Request) (*http.Response, error) {
				resp, _ := respond(tt.status)(r)
				resp.Header = http.Header{"Retry-After": {tt.value}}
				return resp, nil
			})}
			c := &http.Client{Transport: tr}
			_, err := get(t, c, context.Background(), "http://example.invalid/")
			require.NoError(t, err)
			_, err = get(t, c, context.Background(), "http://example.invalid/")
			if tt.max == 0 {
				require.NoError(t, err)
				return
			}
			var ra *adaptive.RetryAfterError
			require.ErrorAs(t, err, &ra)
			require.GreaterOrEqual(t, ra.RetryAfter, tt.min)
			require.LessOrEqual(t, ra.RetryAfter, tt.max)
		})
	}
}

// TestTransportCarriesTheClass sends requests to a loopback server that
// echoes the class header it got: a class in the request's context goes
// in the header (DefaultClassHeader, or ClassHeader), one the request sets
// itself stands, and the caller's request is not changed.
func TestTransportCarriesTheClass(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Header.Get(r.URL.Query().Get("h")))
	}))
	defer srv.Close()
	tests := []struct {
		name   string
		header string // Transport.ClassHeader
		class  string // in the context; "" for none
		set    string // the request's own header
		want   string
	}{
		{"class", "", "critical", "", "critical"},
		{"no class", "", "", "", ""},
		{"own header stands", "", "critical", "sheddable", "sheddable"},
		{"custom header", "X-Priority", "critical", "", "critical"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := newLimiter(t, &recorder{}, 1, 10, 10)
			c := &http.Client{Transport: &adaptive.Transport{Limiter: lim, Base: srv.Client().Transport, ClassHeader: tt.header}}
			name := tt.header
			if name == "" {
				name = overload.DefaultClassHeader
			}
			ctx := context.Background()
			if tt.class != "" {
				ctx = overload.ContextWithClass(ctx, tt.class)
			}
			req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"?h="+name, nil)
			require.NoError(t, err)
			if tt.set != "" {
				req.Header.Set(name, tt.set)
			}
			resp, err := c.Do(req)
			require.NoError(t, err)
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Equal(t, tt.want, string(b))
			require.Equal(t, tt.set, req.Header.Get(name), "the caller's request is not changed")
		})
	}
}

// TestTransportThrottleSurvivesAPanickingBase: a Base that panics with a
// Throttle set leaves no permit taken, and the panic reaches the caller.
func TestTransportThrottleSurvivesAPanickingBase(t *testing.T) {
	lim := newLimiter(t, &recorder{}, 1, 1, 1)
	th := newThrottle(t)
	tr := &adaptive.Transport{Limiter: lim, Throttle: th, MaxRetryAfter: time.Second,
		Base: roundTripper(func(*http.Request) (*http.Response, error) { panic("base") })}
	require.PanicsWithValue(t, "base", func() {
		_, _ = tr.RoundTrip(httptest.NewRequest("GET", "/", nil))
	})
	require.Equal(t, int64(0), lim.Stats().InFlight)
	var held adaptive.Permit
	require.True(t, lim.TryAcquire(&held))
	held.Ignored()
}

// closeRecorder is a request body that records whether it was closed.
type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeRecorder) Close() error { c.closed.Store(true); return nil }

// TestTransportClosesTheBodyOfARefusedRequest: a request that RoundTrip
// refuses before Base (the limit, the throttle, a Retry-After) has its
// body closed, as a RoundTripper must on every error.
func TestTransportClosesTheBodyOfARefusedRequest(t *testing.T) {
	always503 := roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, _ := respond(http.StatusServiceUnavailable)(r)
		resp.Header = http.Header{"Retry-After": {"60"}}
		return resp, nil
	})
	tests := []struct {
		name    string
		prepare func(t *testing.T, tr *adaptive.Transport)
		want    error
	}{
		{"limit", func(t *testing.T, tr *adaptive.Transport) {
			var p adaptive.Permit
			require.True(t, tr.Limiter.TryAcquire(&p))
			t.Cleanup(p.Ignored)
		}, adaptive.ErrLimited},
		{"retry after", func(t *testing.T, tr *adaptive.Transport) {
			tr.MaxRetryAfter = time.Minute
			_, err := tr.RoundTrip(httptest.NewRequest("GET", "/", nil))
			require.NoError(t, err)
		}, adaptive.ErrLimited},
		{"throttle", func(t *testing.T, tr *adaptive.Transport) {
			tr.Throttle = newThrottle(t)
			for range 1000 { // the throttle refuses nearly every request after these
				_, _ = tr.RoundTrip(httptest.NewRequest("GET", "/", nil))
			}
		}, adaptive.ErrThrottled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &adaptive.Transport{Limiter: newLimiter(t, &recorder{}, 1, 1, 1), Base: always503}
			tt.prepare(t, tr)
			var err error
			for range 100 { // the throttle lets one through now and then
				body := &closeRecorder{Reader: strings.NewReader("body")}
				req := httptest.NewRequest("POST", "/", body)
				req.Body = body
				var resp *http.Response
				resp, err = tr.RoundTrip(req)
				if err != nil {
					require.True(t, body.closed.Load(), "the refused request's body is closed")
					break
				}
				_ = resp.Body.Close()
			}
			require.ErrorIs(t, err, tt.want)
		})
	}
}
