package bench_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/httprate"

	"github.com/atomicsem/atomicsem/keyed"
)

// The per-client middleware: keyed.Middleware against go-chi/httprate's
// LimitByIP, each at 10 requests a second per client address (httprate
// counts them in a sliding window of one second, keyed in a bucket of 10),
// in front of a handler that writes nothing. The requests come from
// httpClients addresses, uniformly, pre-built; the writer keeps one header
// map, cleared per request, so that the rows count the middleware's own
// work.

const httpClients = 10_000

// headerWriter is an http.ResponseWriter that discards the body.
type headerWriter struct {
	h    http.Header
	code int
}

func (w *headerWriter) Header() http.Header         { return w.h }
func (w *headerWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *headerWriter) WriteHeader(code int)        { w.code = code }

func BenchmarkKeyedHTTP(b *testing.B) {
	reqs := make([]*http.Request, httpClients)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodGet, "/", nil)
		reqs[i].RemoteAddr = fmt.Sprintf("10.%d.%d.%d:443", i>>16&255, i>>8&255, i&255)
	}
	empty := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	impls := []struct {
		name string
		make func() http.Handler
	}{
		{"keyed", func() http.Handler {
			return keyed.Middleware(keyed.MustNewLimiter(keyedRate, keyedBurst))(empty)
		}},
		{"httprate", func() http.Handler {
			// Both rows key by the remote address, as the requests come
			// from no proxy.
			//lint:ignore SA1019 the remote address is the key both rows use
			return httprate.LimitByIP(keyedBurst, time.Second)(empty)
		}},
	}
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			h := impl.make()
			for _, r := range reqs {
				h.ServeHTTP(&headerWriter{h: http.Header{}}, r)
			}
			var start atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			defer measureCPU(b)()
			b.RunParallel(func(pb *testing.PB) {
				i := int(start.Add(httpClients / 7))
				w := &headerWriter{h: http.Header{}}
				for pb.Next() {
					clear(w.h)
					h.ServeHTTP(w, reqs[i%httpClients])
					i++
				}
			})
		})
	}
}
