package adaptivebench_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/atomicsem/atomicsem/adaptive"
)

// BenchmarkHandler measures what adaptive.Handler adds to a request, beside
// the same handler served bare, with -benchmem for the allocations:
//
//   - path=inproc calls ServeHTTP directly with a writer and a request
//     reused across iterations, so that whatever is allocated is the
//     middleware's own (the bare handler allocates nothing).
//   - path=loopback makes the request over HTTP/1.1 on 127.0.0.1 through
//     net/http's client and server, the regime a server runs in; the
//     allocations are both sides' in the one process.
//
// The limiter's bounds keep every request admitted.
func BenchmarkHandler(b *testing.B) {
	ok := []byte("ok")
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(ok) })
	impls := []struct {
		name string
		wrap func(b *testing.B, h http.Handler) http.Handler
	}{
		{"bare", func(_ *testing.B, h http.Handler) http.Handler { return h }},
		{"adaptive", func(b *testing.B, h http.Handler) http.Handler {
			lim, err := adaptive.New(nil, adaptive.WithLimits(500, 100, 1000))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(lim.Close)
			return adaptive.Handler(lim, h)
		}},
	}
	for _, impl := range impls {
		b.Run("path=inproc/impl="+impl.name, func(b *testing.B) {
			h := impl.wrap(b, next)
			w := &sink{header: http.Header{}}
			r := httptest.NewRequest("GET", "/", nil)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
		})
	}
	for _, impl := range impls {
		b.Run("path=loopback/impl="+impl.name, func(b *testing.B) {
			srv := httptest.NewServer(impl.wrap(b, next))
			defer srv.Close()
			client := srv.Client()
			defer client.CloseIdleConnections()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		})
	}
}

// sink is a ResponseWriter that keeps nothing and allocates nothing.
type sink struct{ header http.Header }

func (s *sink) Header() http.Header         { return s.header }
func (s *sink) Write(b []byte) (int, error) { return len(b), nil }
func (s *sink) WriteHeader(int)             {}
