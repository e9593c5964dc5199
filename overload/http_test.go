package overload_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/overload"
)

// serve runs one request through h in its own goroutine and returns the
// recorder, closed when the handler returns.
func serve(h http.Handler, r *http.Request) (*httptest.ResponseRecorder, chan struct{}) {
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, r)
	}()
	return rec, done
}

func request(class string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	if class != "" {
		r.Header.Set(overload.DefaultClassHeader, class)
	}
	return r
}

func TestMiddlewareTakesTheClassFromTheHeader(t *testing.T) {
	g := overload.MustNew(10, 10, []overload.Class{{Name: "Critical"}, {Name: "normal"}, {Name: "sheddable"}})
	var seen []string
	h := overload.Middleware(g)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := overload.ClassFromContext(r.Context())
		require.True(t, ok)
		seen = append(seen, name)
	}))
	for _, v := range []string{"critical", "CRITICAL", " normal ", "sheddable", "", "unknown"} {
		h.ServeHTTP(httptest.NewRecorder(), request(v))
	}
	require.Equal(t, []string{"Critical", "Critical", "normal", "sheddable", "sheddable", "sheddable"}, seen)

	seen = nil
	h = overload.Middleware(g, overload.WithClassHeader("x-criticality"), overload.WithDefaultClass("NORMAL"))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			name, _ := overload.ClassFromContext(r.Context())
			seen = append(seen, name)
		}))
	r := request("")
	r.Header.Set("X-Criticality", "critical")
	h.ServeHTTP(httptest.NewRecorder(), r)
	h.ServeHTTP(httptest.NewRecorder(), request("critical")) // the default header is not read
	require.Equal(t, []string{"Critical", "normal"}, seen)

	seen = nil
	h = overload.Middleware(g, overload.WithClassFunc(func(r *http.Request) string {
		if r.URL.Path == "/health" {
			return "critical"
		}
		return ""
	}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, _ := overload.ClassFromContext(r.Context())
		seen = append(seen, name)
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/health", nil))
	h.ServeHTTP(httptest.NewRecorder(), request("critical"))
	require.Equal(t, []string{"Critical", "sheddable"}, seen)
	require.Equal(t, int64(0), g.Held())
}

func TestMiddlewareServesByPriorityAndShedsWith503(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(1, 1, []overload.Class{{Name: "critical"}, {Name: "sheddable"}},
			overload.WithMaxWait(100*time.Millisecond))
		release := make(chan struct{})
		var order []string
		h := overload.Middleware(g)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			name, _ := overload.ClassFromContext(r.Context())
			order = append(order, name)
			if r.URL.Query().Get("block") != "" {
				<-release
			}
		}))
		_, first := serve(h, httptest.NewRequest("GET", "/?block=1", nil))
		synctest.Wait()
		shedRec, shedDone := serve(h, request("sheddable"))
		synctest.Wait()
		_, critDone := serve(h, request("critical"))
		synctest.Wait()
		close(release)
		<-first
		<-critDone
		<-shedDone
		require.Equal(t, []string{"sheddable", "critical", "sheddable"}, order)
		require.Equal(t, http.StatusOK, shedRec.Code)

		// A request that waits out the maximum wait is answered 503 with
		// Retry-After.
		tok := take(t, g, 0, 1)
		rec, done := serve(h, request("sheddable"))
		time.Sleep(100 * time.Millisecond)
		<-done
		require.Equal(t, http.StatusServiceUnavailable, rec.Code)
		require.Equal(t, "1", rec.Header().Get("Retry-After"))
		tok.Release()
	})
}

func TestMiddlewareWithRejectionToldWhy(t *testing.T) {
	g := overload.MustNew(1, 1, []overload.Class{{Name: "only"}}, overload.WithMaxQueue(1))
	var why error
	h := overload.Middleware(g, overload.WithRejection(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		why = overload.Rejected(r)
		w.WriteHeader(http.StatusTooManyRequests)
	})))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, overload.Rejected(r))
	}))
	h.ServeHTTP(httptest.NewRecorder(), request(""))
	tok := take(t, g, 0, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, request("").WithContext(ctx))
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.ErrorIs(t, why, context.Canceled)
	g.Close()
	h.ServeHTTP(httptest.NewRecorder(), request(""))
	require.ErrorIs(t, why, overload.ErrClosed)
	tok.Release()
}

// TestMiddlewareReleasesThePermitWhenTheHandlerPanics checks the house
// rule for user code: the panic reaches the caller, the permit does not
// leak.
func TestMiddlewareReleasesThePermitWhenTheHandlerPanics(t *testing.T) {
	g := overload.MustNew(1, 1, []overload.Class{{Name: "only"}})
	h := overload.Middleware(g)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("handler bug")
	}))
	require.PanicsWithValue(t, "handler bug", func() { h.ServeHTTP(httptest.NewRecorder(), request("")) })
	require.Equal(t, int64(0), g.Held())
}

// TestMiddlewareKeepsTheWritersInterfaces checks that the handler gets the
// very writer the server gave, with whatever optional interfaces it has.
func TestMiddlewareKeepsTheWritersInterfaces(t *testing.T) {
	g := overload.MustNew(1, 1, []overload.Class{{Name: "only"}})
	var got http.ResponseWriter
	h := overload.Middleware(g)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = w }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, request(""))
	require.Same(t, rec, got)
	_, ok := got.(http.Flusher)
	require.True(t, ok)
}

// TestClassifierAnswersAsMiddleware checks that a Classifier made with
// Middleware's options finds the class Middleware admits a request as, and
// refuses as it does.
func TestClassifierAnswersAsMiddleware(t *testing.T) {
	g := overload.MustNew(1, 1, []overload.Class{{Name: "Critical"}, {Name: "normal"}, {Name: "sheddable"}})
	opts := []overload.HTTPOption{overload.WithClassHeader("X-Criticality"), overload.WithDefaultClass("normal")}
	cl := overload.NewClassifier(g, opts...)
	var seen string
	h := overload.Middleware(g, opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = overload.ClassFromContext(r.Context())
	}))
	for _, v := range []string{"critical", " SHEDDABLE ", "", "unknown"} {
		r := request("")
		r.Header.Set("X-Criticality", v)
		h.ServeHTTP(httptest.NewRecorder(), r)
		c, name := cl.Class(r)
		require.Equal(t, seen, name, "class %q", v)
		got, ok := g.Class(name)
		require.True(t, ok)
		require.Equal(t, got, c)
	}

	tok := take(t, g, 0, 1) // the gate is full: Middleware refuses
	defer tok.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	want := httptest.NewRecorder()
	h.ServeHTTP(want, request("").WithContext(ctx))
	got := httptest.NewRecorder()
	cl.Refuse(got, request(""), context.Canceled)
	require.Equal(t, want.Code, got.Code)
	require.Equal(t, want.Header(), got.Header())
	require.Equal(t, want.Body.String(), got.Body.String())

	var why error
	cl = overload.NewClassifier(g, overload.WithRejection(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		why = overload.Rejected(r)
		w.WriteHeader(http.StatusTooManyRequests)
	})))
	got = httptest.NewRecorder()
	cl.Refuse(got, request(""), overload.ErrQueueFull)
	require.Equal(t, http.StatusTooManyRequests, got.Code)
	require.Equal(t, "1", got.Header().Get("Retry-After"))
	require.ErrorIs(t, why, overload.ErrQueueFull)
	require.PanicsWithValue(t, "overload: NewClassifier called with a nil HTTPOption", func() { overload.NewClassifier(g, nil) })
}
