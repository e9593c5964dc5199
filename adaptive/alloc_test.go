package adaptive_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
)

// TestFastPathDoesNotAllocate checks that admitting a request and recording
// its outcome touch no heap, with each controller, with and without an
// observer: a Permit lives in the caller's variable, and the controllers
// keep their state in place.
func TestFastPathDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race build gives every token a cell of its own to catch copies, an allocation")
	}
	ctrls := []struct {
		name string
		ctrl func() adaptive.Controller
	}{
		{"AIMD", func() adaptive.Controller { return &adaptive.AIMD{} }},
		{"Vegas", func() adaptive.Controller { return &adaptive.Vegas{} }},
		{"Gradient2", func() adaptive.Controller { return &adaptive.Gradient2{} }},
	}
	ops := []struct {
		name string
		op   func(t *testing.T, lim *adaptive.Limiter, p *adaptive.Permit)
	}{
		{"TryAcquire+Succeeded", func(t *testing.T, lim *adaptive.Limiter, p *adaptive.Permit) {
			if !lim.TryAcquire(p) {
				t.Fatal("TryAcquire failed")
			}
			p.Succeeded()
		}},
		{"TryAcquire+Dropped", func(t *testing.T, lim *adaptive.Limiter, p *adaptive.Permit) {
			if !lim.TryAcquire(p) {
				t.Fatal("TryAcquire failed")
			}
			p.Dropped()
		}},
		{"Acquire+Ignored", func(t *testing.T, lim *adaptive.Limiter, p *adaptive.Permit) {
			if err := lim.Acquire(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			p.Ignored()
		}},
		{"TryAcquire refused", func(t *testing.T, lim *adaptive.Limiter, p *adaptive.Permit) {
			var q adaptive.Permit
			if !lim.TryAcquire(p) {
				t.Fatal("TryAcquire failed")
			}
			if lim.TryAcquire(&q) {
				t.Fatal("TryAcquire admitted a second request under a limit of 1")
			}
			p.Ignored()
		}},
	}
	for _, c := range ctrls {
		for _, o := range ops {
			for _, observed := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/observed=%t", c.name, o.name, observed), func(t *testing.T) {
					// Limit 1, so that every window is one sample: the
					// controllers decide, and probe, as often as they can.
					lim := newLimiter(t, c.ctrl(), 1, 1, 1)
					if observed {
						var n int
						_, err := lim.Observe(func(adaptive.Outcome, time.Duration) { n++ })
						require.NoError(t, err)
					}
					var p adaptive.Permit
					for range 1000 { // past the first probes
						o.op(t, lim, &p)
					}
					allocs := testing.AllocsPerRun(1000, func() { o.op(t, lim, &p) })
					require.Zero(t, allocs)
				})
			}
		}
	}
}

// TestHandlerAllocatesOnlyItsWriter checks that Handler's cost in heap is
// the one writer it hands to next, whatever optional interfaces that
// writer has: the Permit stays on the stack.
func TestHandlerAllocatesOnlyItsWriter(t *testing.T) {
	lim := newLimiter(t, &adaptive.AIMD{}, 1, 10, 5)
	h := adaptive.Handler(lim, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/", nil)
	want := 1.0
	if raceEnabled {
		want++ // the race build gives every token a cell of its own
	}
	require.Equal(t, want, testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, r) }))
	require.Equal(t, uint64(1001), lim.Stats().Succeeded)
}
