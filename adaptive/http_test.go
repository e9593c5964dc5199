package adaptive_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
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

// TestHandlerClassifiesOutcomes serves one request per row of the outcome
// table through Handler, in a bubble, on a limiter whose latency bound is
// 10 ms, and checks how the permit ended. A row whose verdict is
// Inconclusive runs twice: answered at once it counts as Ignored, and
// answered after 20 ms, past the bound, as Dropped.
func TestHandlerClassifiesOutcomes(t *testing.T) {
	tests := []struct {
		name   string
		status int // 0: write nothing
		cancel bool
		expire bool // the request's deadline has passed
		panics bool
		want   adaptive.Outcome
	}{
		{"200", http.StatusOK, false, false, false, adaptive.Succeeded},
		{"nothing written", 0, false, false, false, adaptive.Succeeded},
		{"404", http.StatusNotFound, false, false, false, adaptive.Succeeded},
		{"500", http.StatusInternalServerError, false, false, false, adaptive.Inconclusive},
		{"501", http.StatusNotImplemented, false, false, false, adaptive.Inconclusive},
		{"503 from downstream", http.StatusServiceUnavailable, false, false, false, adaptive.Dropped},
		{"429 from downstream", http.StatusTooManyRequests, false, false, false, adaptive.Dropped},
		{"504 from downstream", http.StatusGatewayTimeout, false, false, false, adaptive.Dropped},
		{"client gone", http.StatusOK, true, false, false, adaptive.Inconclusive},
		{"client gone, 503", http.StatusServiceUnavailable, true, false, false, adaptive.Inconclusive},
		{"deadline passed, 200", http.StatusOK, false, true, false, adaptive.Inconclusive},
		{"deadline passed, 503", http.StatusServiceUnavailable, false, true, false, adaptive.Inconclusive},
		{"handler panics", 0, false, false, true, adaptive.Ignored},
	}
	for _, tt := range tests {
		for _, wait := range []time.Duration{0, 20 * time.Millisecond} {
			if wait > 0 && tt.want != adaptive.Inconclusive {
				continue
			}
			t.Run(fmt.Sprintf("%s/after %v", tt.name, wait), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					lim, err := adaptive.New(&recorder{}, adaptive.WithLimits(1, 1, 10), adaptive.WithLatencyBound(10*time.Millisecond))
					require.NoError(t, err)
					var got adaptive.Outcome
					h := adaptive.Handler(lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						time.Sleep(wait)
						if tt.panics {
							panic(http.ErrAbortHandler)
						}
						if tt.status != 0 {
							w.WriteHeader(tt.status)
						}
					}), adaptive.WithClassifier(func(r *http.Request, status int) adaptive.Outcome {
						got = adaptive.ClassifyServer(r, status)
						return got
					}))
					ctx, cancel := context.WithCancel(context.Background())
					if tt.cancel {
						cancel()
					}
					defer cancel()
					if tt.expire {
						var cancelTimeout context.CancelFunc
						ctx, cancelTimeout = context.WithDeadline(ctx, time.Now())
						defer cancelTimeout()
					}
					func() {
						defer func() { _ = recover() }()
						h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, "GET", "/", nil))
					}()
					if !tt.panics {
						require.Equal(t, tt.want, got, "ClassifyServer's verdict")
					}
					require.Equal(t, counted(tt.want, wait > 10*time.Millisecond), counts(lim))
					require.Equal(t, int64(0), lim.Stats().InFlight)
				})
			})
		}
	}
}

// counted returns the counts of Succeeded, Dropped and Ignored that one
// request ended with o leaves, late telling whether it lasted past the
// latency bound.
func counted(o adaptive.Outcome, late bool) [3]uint64 {
	switch {
	case o == adaptive.Succeeded:
		return [3]uint64{1, 0, 0}
	case o == adaptive.Dropped, o == adaptive.Inconclusive && late:
		return [3]uint64{0, 1, 0}
	}
	return [3]uint64{0, 0, 1}
}

// counts returns lim's counts of Succeeded, Dropped and Ignored.
func counts(lim *adaptive.Limiter) [3]uint64 {
	st := lim.Stats()
	return [3]uint64{st.Succeeded, st.Dropped, st.Ignored}
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

// TestHandlerUnderTimeoutHandler puts Handler inside http.TimeoutHandler,
// whose deadline passes while next runs; next then answers 503. The
// permit ends Inconclusive, and as the request lasted past the latency
// bound (50 ms), Dropped.
func TestHandlerUnderTimeoutHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := adaptive.New(&recorder{}, adaptive.WithLimits(1, 1, 10), adaptive.WithLatencyBound(50*time.Millisecond))
		require.NoError(t, err)
		h := http.TimeoutHandler(adaptive.Handler(lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			w.WriteHeader(http.StatusServiceUnavailable)
		})), 100*time.Millisecond, "timed out")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		require.Equal(t, http.StatusServiceUnavailable, w.Code)
		synctest.Wait() // for next, which TimeoutHandler runs in a goroutine
		st := lim.Stats()
		require.Equal(t, [3]uint64{0, 1, 0}, [3]uint64{st.Succeeded, st.Dropped, st.Ignored})
	})
}

// TestHandlerStreamsServerSentEvents serves an event stream through
// Handler over HTTP: the client reads the first event while the handler is
// still running, which it can only if Flush reached the connection.
func TestHandlerStreamsServerSentEvents(t *testing.T) {
	lim := newLimiter(t, &recorder{}, 1, 10, 1)
	read := make(chan struct{})
	srv := httptest.NewServer(adaptive.Handler(lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-read // the client has the first event: it was flushed
		_, _ = io.WriteString(w, "data: second\n\n")
	})))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err, "the first event did not arrive before the handler ended")
	require.Equal(t, "data: first\n", line)
	close(read)
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	require.Equal(t, "\ndata: second\n\n", string(rest))
	require.Equal(t, uint64(1), lim.Stats().Succeeded)
}

// TestTransportUpgradesAConnection upgrades a connection through
// Transport, to a server behind Handler that hijacks it and echoes: the
// 101 response's body stays an io.ReadWriteCloser the client writes to,
// and the permit ends at the 101, as the upgrade's round trip.
func TestTransportUpgradesAConnection(t *testing.T) {
	server := newLimiter(t, &recorder{}, 1, 10, 1)
	srv := httptest.NewServer(adaptive.Handler(server, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := w.(http.Hijacker).Hijack()
		if !assert.NoError(t, err) {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_ = brw.Flush()
		line, _ := brw.ReadString('\n')
		_, _ = brw.WriteString(line)
		_ = brw.Flush()
	})))
	defer srv.Close()

	client := newLimiter(t, &recorder{}, 1, 10, 1)
	c := &http.Client{Transport: &adaptive.Transport{Limiter: client, Base: srv.Client().Transport}}
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := c.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	require.Equal(t, uint64(1), client.Stats().Succeeded, "the permit ends at the 101")
	require.Equal(t, int64(0), client.Stats().InFlight)
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	require.True(t, ok, "the 101 body is an io.ReadWriteCloser")
	_, err = io.WriteString(rwc, "hello\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(rwc).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "hello\n", line)
	require.NoError(t, rwc.Close())
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

// TestTransportClassifiesOutcomes makes one request per row of the
// outcome table through Transport, in a bubble, on a limiter whose latency
// bound is 10 ms, and checks how the permit ended; a row whose verdict is
// Inconclusive runs answered at once (Ignored) and after 20 ms (Dropped).
func TestTransportClassifiesOutcomes(t *testing.T) {
	fail := func(err error) roundTripper {
		return func(*http.Request) (*http.Response, error) { return nil, err }
	}
	tests := []struct {
		name string
		base roundTripper
		want adaptive.Outcome
	}{
		{"200", respond(http.StatusOK), adaptive.Succeeded},
		{"404", respond(http.StatusNotFound), adaptive.Succeeded},
		{"500", respond(http.StatusInternalServerError), adaptive.Inconclusive},
		{"429", respond(http.StatusTooManyRequests), adaptive.Dropped},
		{"503", respond(http.StatusServiceUnavailable), adaptive.Dropped},
		{"504", respond(http.StatusGatewayTimeout), adaptive.Dropped},
		{"deadline", fail(context.DeadlineExceeded), adaptive.Inconclusive},
		{"cancelled", fail(context.Canceled), adaptive.Inconclusive},
		{"network timeout", fail(&net.OpError{Op: "dial", Err: timeoutError{}}), adaptive.Dropped},
		{"connection refused", fail(&net.OpError{Op: "dial", Err: errors.New("connection refused")}), adaptive.Dropped},
	}
	for _, tt := range tests {
		for _, wait := range []time.Duration{0, 20 * time.Millisecond} {
			if wait > 0 && tt.want != adaptive.Inconclusive {
				continue
			}
			t.Run(fmt.Sprintf("%s/after %v", tt.name, wait), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					lim, err := adaptive.New(&recorder{}, adaptive.WithLimits(1, 1, 10), adaptive.WithLatencyBound(10*time.Millisecond))
					require.NoError(t, err)
					base := roundTripper(func(r *http.Request) (*http.Response, error) {
						time.Sleep(wait)
						return tt.base(r)
					})
					var got adaptive.Outcome
					c := &http.Client{Transport: &adaptive.Transport{Limiter: lim, Base: base,
						Classify: func(resp *http.Response, err error) adaptive.Outcome {
							got = adaptive.ClassifyClient(resp, err)
							return got
						}}}
					resp, err := c.Get("http://example.invalid/")
					if err == nil {
						require.Equal(t, int64(1), lim.Stats().InFlight, "held until the body is done")
						b, _ := io.ReadAll(resp.Body)
						require.Equal(t, "body", string(b))
						require.NoError(t, resp.Body.Close())
					}
					require.Equal(t, tt.want, got, "ClassifyClient's verdict")
					require.Equal(t, counted(tt.want, wait > 10*time.Millisecond), counts(lim))
					require.Equal(t, int64(0), lim.Stats().InFlight)
				})
			})
		}
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

// TestHandlerBacksOffWhenEveryRequestFails sends 50,000 requests through
// Handler, one after another, to a service that answers each with a 503
// after 1 ms, with the limit in [1, 1000] from 400: every controller takes
// the limit to its minimum within the first window of drops and keeps it
// there.
func TestHandlerBacksOffWhenEveryRequestFails(t *testing.T) {
	const requests = 50_000
	for _, c := range []struct {
		name string
		ctrl adaptive.Controller
	}{
		{"AIMD", &adaptive.AIMD{}},
		{"Vegas", &adaptive.Vegas{}},
		{"Gradient2", &adaptive.Gradient2{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				lim := newLimiter(t, c.ctrl, 1, 1000, 400)
				h := adaptive.Handler(lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					time.Sleep(time.Millisecond)
					w.WriteHeader(http.StatusServiceUnavailable)
				}))
				atMin := -1 // requests after which the limit was at its minimum and stayed
				for i := range requests {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
					require.Equal(t, http.StatusServiceUnavailable, w.Code)
					switch limit := lim.Stats().Limit; {
					case limit == 1 && atMin < 0:
						atMin = i + 1
					case limit != 1:
						atMin = -1
					}
				}
				t.Logf("at the minimum after %d of %d requests", atMin, requests)
				require.Positive(t, atMin, "the limit ends above its minimum")
				require.LessOrEqual(t, atMin, 400, "the limit reaches its minimum within a window of drops")
				st := lim.Stats()
				require.Equal(t, [3]uint64{0, requests, 0}, [3]uint64{st.Succeeded, st.Dropped, st.Ignored})
			})
		})
	}
}
