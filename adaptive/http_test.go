package adaptive_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
)

func TestHandlerShedsWith503WhenFull(t *testing.T) {
	lim := newLimiter(t, &recorder{}, 1, 10, 1)
	entered, release := make(chan struct{}), make(chan struct{})
	h := adaptive.Handler(lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "ok")
	}))

	done := make(chan *httptest.ResponseRecorder)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		done <- w
	}()
	<-entered
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Equal(t, "1", w.Header().Get("Retry-After"))

	close(release)
	first := <-done
	require.Equal(t, http.StatusOK, first.Code)
	require.Equal(t, "ok", first.Body.String())
	st := lim.Stats()
	require.Equal(t, uint64(1), st.Succeeded)
	require.Equal(t, uint64(1), st.Rejected)
	require.Equal(t, int64(0), st.InFlight)
}

func TestHandlerClassifiesOutcomes(t *testing.T) {
	tests := []struct {
		name    string
		status  int // 0: write nothing
		cancel  bool
		panics  bool
		success uint64
		dropped uint64
		ignored uint64
	}{
		{"200", http.StatusOK, false, false, 1, 0, 0},
		{"nothing written", 0, false, false, 1, 0, 0},
		{"500", http.StatusInternalServerError, false, false, 1, 0, 0},
		{"503 from downstream", http.StatusServiceUnavailable, false, false, 0, 1, 0},
		{"429 from downstream", http.StatusTooManyRequests, false, false, 0, 1, 0},
		{"client gone", http.StatusOK, true, false, 0, 0, 1},
		{"handler panics", 0, false, true, 0, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := newLimiter(t, &recorder{}, 1, 10, 1)
			h := adaptive.Handler(lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.panics {
					panic(http.ErrAbortHandler)
				}
				if tt.status != 0 {
					w.WriteHeader(tt.status)
				}
			}))
			ctx, cancel := context.WithCancel(context.Background())
			if tt.cancel {
				cancel()
			}
			defer cancel()
			func() {
				defer func() { _ = recover() }()
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, "GET", "/", nil))
			}()
			st := lim.Stats()
			require.Equal(t, [3]uint64{tt.success, tt.dropped, tt.ignored}, [3]uint64{st.Succeeded, st.Dropped, st.Ignored})
			require.Equal(t, int64(0), st.InFlight)
		})
	}
}

func TestHandlerOptions(t *testing.T) {
	lim := newLimiter(t, &recorder{}, 1, 10, 1)
	var seen int
	h := adaptive.Handler(lim,
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTeapot)
			var p adaptive.Permit
			require.False(t, lim.TryAcquire(&p))
			adaptive.Handler(lim, http.NotFoundHandler(),
				adaptive.WithRejection(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(http.StatusTooManyRequests)
				}))).ServeHTTP(w, r)
		}),
		adaptive.WithClassifier(func(r *http.Request, status int) adaptive.Outcome {
			seen = status
			return adaptive.Dropped
		}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, http.StatusTeapot, seen, "the classifier sees the first status written")
	require.Equal(t, uint64(1), lim.Stats().Dropped)
}

func TestHandlerKeepsTheWriterInterfaces(t *testing.T) {
	lim := newLimiter(t, &recorder{}, 1, 10, 1)
	h := adaptive.Handler(lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "a")
		require.NoError(t, http.NewResponseController(w).Flush())
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.True(t, w.Flushed)
}

// roundTripper is an http.RoundTripper made of a function.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func respond(status int) roundTripper {
	return func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader("body")), Request: r}, nil
	}
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

var _ net.Error = timeoutError{}

func TestTransportClassifiesOutcomes(t *testing.T) {
	fail := func(err error) roundTripper {
		return func(*http.Request) (*http.Response, error) { return nil, err }
	}
	tests := []struct {
		name    string
		base    roundTripper
		success uint64
		dropped uint64
		ignored uint64
	}{
		{"200", respond(http.StatusOK), 1, 0, 0},
		{"404", respond(http.StatusNotFound), 1, 0, 0},
		{"429", respond(http.StatusTooManyRequests), 0, 1, 0},
		{"503", respond(http.StatusServiceUnavailable), 0, 1, 0},
		{"deadline", fail(context.DeadlineExceeded), 0, 1, 0},
		{"network timeout", fail(&net.OpError{Op: "dial", Err: timeoutError{}}), 0, 1, 0},
		{"cancelled", fail(context.Canceled), 0, 0, 1},
		{"other error", fail(errors.New("connection refused")), 0, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := newLimiter(t, &recorder{}, 1, 10, 1)
			c := &http.Client{Transport: &adaptive.Transport{Limiter: lim, Base: tt.base}}
			resp, err := c.Get("http://example.invalid/")
			if err == nil {
				require.Equal(t, int64(1), lim.Stats().InFlight, "held until the body is done")
				b, _ := io.ReadAll(resp.Body)
				require.Equal(t, "body", string(b))
				require.NoError(t, resp.Body.Close())
			}
			st := lim.Stats()
			require.Equal(t, [3]uint64{tt.success, tt.dropped, tt.ignored}, [3]uint64{st.Succeeded, st.Dropped, st.Ignored})
			require.Equal(t, int64(0), st.InFlight)
		})
	}
}

func TestTransportShedsOrWaits(t *testing.T) {
	synctest.Test(t, testTransportShedsOrWaits)
}

func testTransportShedsOrWaits(t *testing.T) {
	lim := newLimiter(t, &recorder{}, 1, 10, 1)
	var held adaptive.Permit
	require.True(t, lim.TryAcquire(&held))

	shed := &http.Client{Transport: &adaptive.Transport{Limiter: lim, Base: respond(http.StatusOK)}}
	_, err := shed.Get("http://example.invalid/")
	require.ErrorIs(t, err, adaptive.ErrLimited)

	wait := &http.Client{Transport: &adaptive.Transport{Limiter: lim, Base: respond(http.StatusOK), Wait: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://example.invalid/", nil)
	_, err = wait.Do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	held.Ignored()
	resp, err := wait.Get("http://example.invalid/")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, int64(0), lim.Stats().InFlight)
}

func TestTransportClassifierSeesBodyErrors(t *testing.T) {
	lim := newLimiter(t, &recorder{}, 1, 10, 1)
	broken := roundTripper(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: io.NopCloser(io.MultiReader(strings.NewReader("x"), iotest{})), Request: r}, nil
	})
	var got []error
	c := &http.Client{Transport: &adaptive.Transport{Limiter: lim, Base: broken,
		Classify: func(resp *http.Response, err error) adaptive.Outcome {
			got = append(got, err)
			if err != nil {
				return adaptive.Dropped
			}
			return adaptive.Succeeded
		}}}
	resp, err := c.Get("http://example.invalid/")
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	require.ErrorIs(t, err, errBody)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, []error{nil, errBody}, got)
	require.Equal(t, uint64(1), lim.Stats().Dropped)
}

var errBody = errors.New("connection reset")

type iotest struct{}

func (iotest) Read([]byte) (int, error) { return 0, errBody }

func TestHandlerAndTransportOverTheNetwork(t *testing.T) {
	server := newLimiter(t, nil, 1, 100, 10)
	srv := httptest.NewServer(adaptive.Handler(server, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello")
	})))
	defer srv.Close()

	client := newLimiter(t, nil, 1, 100, 10)
	c := &http.Client{Transport: &adaptive.Transport{Limiter: client, Base: srv.Client().Transport}}
	defer c.CloseIdleConnections()
	for range 20 {
		resp, err := c.Get(srv.URL)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, "hello", string(b))
		require.NoError(t, resp.Body.Close())
	}
	require.Equal(t, uint64(20), server.Stats().Succeeded)
	require.Equal(t, uint64(20), client.Stats().Succeeded)
}
