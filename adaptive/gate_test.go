package adaptive_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/overload"
)

// newGate returns a gate of two classes, critical and sheddable, the
// second of which may hold at most half the limit.
func newGate(t *testing.T, opts ...overload.Option) *overload.Gate {
	t.Helper()
	g, err := overload.New(1, 100, []overload.Class{{Name: "critical"}, {Name: "sheddable", MaxShare: 0.5}}, opts...)
	require.NoError(t, err)
	return g
}

func newGated(t *testing.T, ctrl adaptive.Controller, g *overload.Gate, initial int64) *adaptive.Limiter {
	t.Helper()
	lim, err := adaptive.New(ctrl, adaptive.WithLimits(initial, 1, 100), adaptive.WithGate(g))
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	return lim
}

// TestLimiterMovesTheGatesLimit: New sets the gate's limit to the initial
// limit, and every limit the controller decides becomes the gate's.
func TestLimiterMovesTheGatesLimit(t *testing.T) {
	g := newGate(t)
	ctrl := &fixed{limit: 10}
	lim := newGated(t, ctrl, g, 4)
	require.Equal(t, int64(4), g.Limit())
	require.Equal(t, int64(4), lim.Stats().Limit)

	for _, want := range []int64{10, 7, 30, 1} {
		ctrl.limit = float64(want)
		var p adaptive.Permit
		require.True(t, lim.TryAcquire(&p))
		require.Equal(t, int64(1), g.Held())
		p.Succeeded()
		require.Equal(t, want, g.Limit(), "the controller's limit is the gate's")
		st := lim.Stats()
		require.Equal(t, want, st.Limit)
		require.Equal(t, int64(0), st.InFlight)
	}
	lim.Close()
	require.True(t, g.Stats().Closed, "Close closes the gate")
}

// TestLimiterAdmitsByClassThroughTheGate fills a gated limit of 10: the
// sheddable class stops at its ceiling of 5, as does a request without a
// class or with one the gate has not, while the critical class takes the
// rest; the samples still reach the controller.
func TestLimiterAdmitsByClassThroughTheGate(t *testing.T) {
	g := newGate(t)
	rec := &recorder{}
	lim := newGated(t, rec, g, 10)
	critical := overload.ContextWithClass(context.Background(), "Critical")
	sheddable := overload.ContextWithClass(context.Background(), "sheddable")
	unknown := overload.ContextWithClass(context.Background(), "bulk")

	var ps [10]adaptive.Permit
	for i := range 5 {
		require.True(t, lim.TryAcquireContext(sheddable, &ps[i]), "sheddable %d", i)
	}
	var extra adaptive.Permit
	require.False(t, lim.TryAcquireContext(sheddable, &extra), "sheddable at its ceiling")
	require.False(t, lim.TryAcquireContext(unknown, &extra), "an unknown class is the lowest")
	require.False(t, lim.TryAcquireContext(context.Background(), &extra), "no class is the lowest")
	require.False(t, lim.TryAcquire(&extra), "TryAcquire is the lowest")
	for i := 5; i < 9; i++ {
		require.True(t, lim.TryAcquireContext(critical, &ps[i]), "critical %d", i)
	}
	require.NoError(t, lim.Acquire(critical, &ps[9]), "Acquire takes the class from its context")
	require.False(t, lim.TryAcquireContext(critical, &extra), "the limit is full")
	st := lim.Stats()
	require.Equal(t, int64(10), st.InFlight)
	require.Equal(t, uint64(5), st.Rejected)
	require.Equal(t, []int64{5, 5}, []int64{g.Stats().Classes[0].Held, g.Stats().Classes[1].Held})
	for i := range ps {
		ps[i].Succeeded()
	}
	require.Len(t, rec.samples, 10)
	require.Equal(t, int64(0), g.Held())
}

// TestLimiterAcquireWaitsUnderTheGatesDiscipline: a gated Acquire that
// must wait does so under the gate's queue discipline (here its maximum
// wait), and a permit that comes back goes to the waiting class.
func TestLimiterAcquireWaitsUnderTheGatesDiscipline(t *testing.T) {
	g := newGate(t, overload.WithMaxWait(20*time.Millisecond))
	lim := newGated(t, &recorder{}, g, 1)
	critical := overload.ContextWithClass(context.Background(), "critical")
	var p, q adaptive.Permit
	require.NoError(t, lim.Acquire(critical, &p))
	err := lim.Acquire(critical, &q)
	require.ErrorIs(t, err, overload.ErrMaxWait)
	require.ErrorIs(t, err, overload.ErrShed)

	done := make(chan error, 1)
	go func() { done <- lim.Acquire(critical, &q) }()
	require.Eventually(t, func() bool { return lim.Stats().Waiters == 1 }, 10*time.Second, time.Millisecond)
	p.Succeeded()
	require.NoError(t, <-done)
	q.Succeeded()
}

// TestNewChecksTheGate: the bounds must fit the gate, a gate has no
// semaphore options, and a closed gate is refused.
func TestNewChecksTheGate(t *testing.T) {
	g := newGate(t)
	_, err := adaptive.New(nil, adaptive.WithLimits(10, 1, 200), adaptive.WithGate(g))
	require.ErrorIs(t, err, adaptive.ErrInvalidLimits)
	_, err = adaptive.New(nil, adaptive.WithGate(g), adaptive.WithSemaphoreOptions(atomicsem.WithBarging()))
	require.ErrorIs(t, err, adaptive.ErrInvalidLimits)
	require.Equal(t, int64(1), g.Limit(), "a refused New leaves the gate as it was")
	g.Close()
	_, err = adaptive.New(nil, adaptive.WithLimits(10, 1, 100), adaptive.WithGate(g))
	require.ErrorIs(t, err, overload.ErrClosed)
	require.PanicsWithValue(t, "adaptive: WithGate: nil Gate", func() { adaptive.WithGate(nil) })
	require.PanicsWithValue(t, "adaptive: Limiter.TryAcquireContext: nil ctx", func() {
		var p adaptive.Permit
		//lint:ignore SA1012 the nil context is the point
		newLimiter(t, &recorder{}, 1, 10, 1).TryAcquireContext(nil, &p) //nolint:staticcheck
	})
}

// TestHandlerAdmitsByTheClassHeader serves a gated Handler over loopback
// at a limit of 4, whose handler blocks: sheddable requests (by the class
// header) are shed once their class holds its ceiling of 2, a critical
// request still gets in, and the handler finds the class in its context.
func TestHandlerAdmitsByTheClassHeader(t *testing.T) {
	g := newGate(t)
	lim := newGated(t, &recorder{}, g, 4)
	release := make(chan struct{})
	entered := make(chan string, 10)
	srv := httptest.NewServer(adaptive.Handler(lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		class, _ := overload.ClassFromContext(r.Context())
		entered <- class
		<-release
	})))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free() // before srv.Close, which waits for the handlers

	send := func(class string) chan int {
		done := make(chan int, 1)
		go func() {
			req, _ := http.NewRequest("GET", srv.URL, nil)
			if class != "" {
				req.Header.Set(overload.DefaultClassHeader, class)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				done <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			done <- resp.StatusCode
		}()
		return done
	}
	var held []chan int
	for range 2 {
		held = append(held, send("sheddable"))
		require.Equal(t, "sheddable", <-entered)
	}
	require.Equal(t, http.StatusServiceUnavailable, <-send("sheddable"), "sheddable at its ceiling")
	require.Equal(t, http.StatusServiceUnavailable, <-send(""), "no class is the lowest")
	crit := send("critical")
	select {
	case class := <-entered:
		require.Equal(t, "critical", class)
	case status := <-crit:
		t.Fatalf("the critical request was answered %d without entering", status)
	}
	held = append(held, crit)
	free()
	for _, h := range held {
		require.Equal(t, http.StatusOK, <-h)
	}
	require.Eventually(t, func() bool { return g.Held() == 0 }, 10*time.Second, time.Millisecond)
	require.Equal(t, uint64(2), lim.Stats().Rejected)
}

// TestGatedHandlerPanicLeaksNothing: a handler that panics behind a gated
// Handler leaves no permit of the gate taken.
func TestGatedHandlerPanicLeaksNothing(t *testing.T) {
	g := newGate(t)
	lim := newGated(t, &recorder{}, g, 1)
	h := adaptive.Handler(lim, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("next") }))
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set(overload.DefaultClassHeader, "critical")
	require.PanicsWithValue(t, "next", func() { h.ServeHTTP(httptest.NewRecorder(), req) })
	require.Equal(t, int64(0), g.Held())
	require.Equal(t, int64(0), lim.Stats().InFlight)
}
