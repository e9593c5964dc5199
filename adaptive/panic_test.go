package adaptive_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
)

// errUser is the panic value of the user code in these tests.
var errUser = errors.New("user code panicked")

// requirePanics calls f and requires that it panics with want: the panic of
// user code reaches the caller as it was raised.
func requirePanics(t *testing.T, want any, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		require.Equal(t, want, recover(), "the user code's panic does not reach the caller")
	}()
	f()
}

// requireFree requires that lim has nothing in flight and admits a request
// at once: no permit leaked.
func requireFree(t *testing.T, lim *adaptive.Limiter) {
	t.Helper()
	require.Equal(t, int64(0), lim.Stats().InFlight, "a permit leaked")
	var p adaptive.Permit
	require.True(t, lim.TryAcquire(&p), "a permit leaked")
	p.Ignored()
}

// TestHandlerClassifierPanicFreesTheSlot runs Handler at a limit of 1 with a
// classifier that panics on the first request: the panic reaches the
// server, the permit ends Ignored, and the next request is served, not shed.
func TestHandlerClassifierPanicFreesTheSlot(t *testing.T) {
	lim := newLimiter(t, &recorder{}, 1, 1, 1)
	calls := 0
	h := adaptive.Handler(lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), adaptive.WithClassifier(func(r *http.Request, status int) adaptive.Outcome {
		calls++
		if calls == 1 {
			panic(errUser)
		}
		return adaptive.ClassifyServer(r, status)
	}))
	requirePanics(t, errUser, func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)) })
	require.Equal(t, uint64(1), lim.Stats().Ignored)

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, http.StatusOK, w.Code, "the request after the panic was shed")
	require.Equal(t, uint64(1), lim.Stats().Succeeded)
	requireFree(t, lim)
}

// TestHandlerRejectionPanicTakesNoPermit checks that a rejection handler
// that panics, which runs with no permit, leaves none taken.
func TestHandlerRejectionPanicTakesNoPermit(t *testing.T) {
	lim := newLimiter(t, &recorder{}, 1, 1, 1)
	var held adaptive.Permit
	require.True(t, lim.TryAcquire(&held))
	h := adaptive.Handler(lim, http.NotFoundHandler(),
		adaptive.WithRejection(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(errUser) })))
	requirePanics(t, errUser, func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)) })
	held.Ignored()
	requireFree(t, lim)
}

// TestTransportUserCodePanicFreesTheSlot makes each piece of user code a
// Transport calls panic in turn, at a limit of 1: Base, the classifier on
// a response, on an error, and on a body that fails, and a body whose Close
// panics. Each panic reaches the caller, and the next request is admitted.
func TestTransportUserCodePanicFreesTheSlot(t *testing.T) {
	ok := respond(http.StatusOK)
	classifyPanics := func(onError bool) func(*http.Response, error) adaptive.Outcome {
		return func(resp *http.Response, err error) adaptive.Outcome {
			if (err != nil) == onError {
				panic(errUser)
			}
			return adaptive.ClassifyClient(resp, err)
		}
	}
	tests := []struct {
		name     string
		base     roundTripper
		classify func(*http.Response, error) adaptive.Outcome
		body     func(io.ReadCloser) // the panic comes from the body: reading or closing it
	}{
		{"Base panics", func(*http.Request) (*http.Response, error) { panic(errUser) }, nil, nil},
		{"Classify panics on a response", ok, classifyPanics(false), nil},
		{"Classify panics on an error", func(*http.Request) (*http.Response, error) { return nil, errBody }, classifyPanics(true), nil},
		{"101 and Classify panics", respond(http.StatusSwitchingProtocols), classifyPanics(false), nil},
		// The caller reads the body, whose error the classifier panics on,
		// and does not close it.
		{"Classify panics on a body error", func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Body: io.NopCloser(iotest{}), Request: r}, nil
		}, classifyPanics(true), func(b io.ReadCloser) { _, _ = io.ReadAll(b) }},
		// The caller closes the body unread.
		{"Body.Close panics", func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Body: panickingCloser{strings.NewReader("x")}, Request: r}, nil
		}, nil, func(b io.ReadCloser) { _ = b.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := newLimiter(t, &recorder{}, 1, 1, 1)
			tr := &adaptive.Transport{Limiter: lim, Base: tt.base, Classify: tt.classify}
			req := httptest.NewRequest("GET", "http://example.invalid/", nil)
			if tt.body == nil {
				requirePanics(t, errUser, func() { _, _ = tr.RoundTrip(req) })
			} else {
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				requirePanics(t, errUser, func() { tt.body(resp.Body) })
			}
			requireFree(t, lim)
		})
	}
}

type panickingCloser struct{ io.Reader }

func (panickingCloser) Close() error { panic(errUser) }

// TestTransportNilBodyEndsThePermit gives Transport a Base that answers
// with a nil Body, which http.Client tolerates: the permit ends with the
// response, as there is no body to hold it.
func TestTransportNilBodyEndsThePermit(t *testing.T) {
	lim := newLimiter(t, &recorder{}, 1, 1, 1)
	c := &http.Client{Transport: &adaptive.Transport{Limiter: lim, Base: roundTripper(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusNoContent, Request: r}, nil
	})}}
	resp, err := c.Get("http://example.invalid/")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, uint64(1), lim.Stats().Succeeded)
	requireFree(t, lim)
}

// panicky is a Controller that panics on the sample its field names
// (counting from 1), and leaves the limit as it is otherwise.
type panicky struct{ at, n int }

func (c *panicky) Next(limit float64, _ adaptive.Sample) float64 {
	if c.n++; c.n == c.at {
		panic(errUser)
	}
	return limit
}

// TestControllerPanicReleasesTheLock makes the controller panic on the
// first sample: the panic reaches the goroutine that ended the permit, the
// slot is free, and the limiter's lock is not left held: Stats and the next
// request's end return, where they would wait for ever.
func TestControllerPanicReleasesTheLock(t *testing.T) {
	lim := newLimiter(t, &panicky{at: 1}, 1, 1, 1)
	var p adaptive.Permit
	require.True(t, lim.TryAcquire(&p))
	requirePanics(t, errUser, p.Succeeded)

	done := make(chan adaptive.Stats)
	go func() {
		var q adaptive.Permit
		if lim.TryAcquire(&q) {
			q.Dropped()
		}
		done <- lim.Stats()
	}()
	select {
	case st := <-done:
		require.Equal(t, uint64(1), st.Succeeded)
		require.Equal(t, uint64(1), st.Dropped)
		require.Equal(t, int64(0), st.InFlight)
	case <-time.After(10 * time.Second): // generous: the goroutine does no waiting of its own
		t.Fatal("the limiter's lock is still held after the controller panicked")
	}
}

// panickyBound is a controller whose LatencyBound panics.
type panickyBound struct{}

func (panickyBound) Next(limit float64, _ adaptive.Sample) float64 { return limit }
func (panickyBound) LatencyBound() time.Duration                   { panic(errUser) }

// TestLatencyBoundPanicReleasesTheLock ends a permit Inconclusive under a
// controller whose LatencyBound panics: the panic reaches the goroutine
// that ended the permit, the slot is free, and the limiter's lock, under
// which LatencyBound runs, is not left held.
func TestLatencyBoundPanicReleasesTheLock(t *testing.T) {
	lim := newLimiter(t, panickyBound{}, 1, 1, 1)
	var p adaptive.Permit
	require.True(t, lim.TryAcquire(&p))
	requirePanics(t, errUser, p.Inconclusive)

	done := make(chan adaptive.Stats)
	go func() {
		var q adaptive.Permit
		if lim.TryAcquire(&q) {
			q.Succeeded()
		}
		done <- lim.Stats()
	}()
	select {
	case st := <-done:
		require.Equal(t, uint64(1), st.Succeeded)
		require.Equal(t, int64(0), st.InFlight)
	case <-time.After(10 * time.Second): // generous: the goroutine does no waiting of its own
		t.Fatal("the limiter's lock is still held after LatencyBound panicked")
	}
}
