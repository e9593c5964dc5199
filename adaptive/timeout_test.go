package adaptive_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
)

// TestTimeoutHandlerGoesOutsideHandler composes Handler with
// http.TimeoutHandler both ways, at a limit of 2, with a handler that
// ignores its context and works for a second, and 15 requests 20 ms apart,
// each of which TimeoutHandler answers after 10 ms. With TimeoutHandler
// inside Handler, the permit ends when TimeoutHandler answers, while the
// handler runs on in TimeoutHandler's goroutine: all 15 run at once. With
// TimeoutHandler outside, as the package documentation says to compose
// them, the permit lasts as long as the handler runs, and the limit holds.
func TestTimeoutHandlerGoesOutsideHandler(t *testing.T) {
	tests := []struct {
		name        string
		compose     func(lim *adaptive.Limiter, next http.Handler) http.Handler
		wantRunning int64
	}{
		{"TimeoutHandler outside Handler", func(lim *adaptive.Limiter, next http.Handler) http.Handler {
			return http.TimeoutHandler(adaptive.Handler(lim, next), 10*time.Millisecond, "timed out")
		}, 2},
		{"TimeoutHandler inside Handler", func(lim *adaptive.Limiter, next http.Handler) http.Handler {
			return adaptive.Handler(lim, http.TimeoutHandler(next, 10*time.Millisecond, "timed out"))
		}, 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := newLimiter(t, &recorder{}, 2, 2, 2)
				var running, most atomic.Int64
				h := tt.compose(lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					n := running.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(time.Second) // ignores the request's context
					running.Add(-1)
				}))
				for range 15 {
					go func() {
						w := httptest.NewRecorder()
						h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
						if w.Code != http.StatusServiceUnavailable {
							t.Errorf("status %d, want 503 (timed out or shed)", w.Code)
						}
					}()
					time.Sleep(20 * time.Millisecond)
				}
				time.Sleep(2 * time.Second)
				synctest.Wait()
				require.Equal(t, tt.wantRunning, most.Load(), "handlers running at once")
				st := lim.Stats()
				require.Equal(t, int64(0), st.InFlight)
				require.Equal(t, 15-uint64(tt.wantRunning), st.Rejected)
			})
		})
	}
}
