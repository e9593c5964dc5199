package adaptive_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptive/adaptivetest"
)

// newLimiter returns a limiter with ctrl and the given bounds, failing the
// test on an error.
func newLimiter(t testing.TB, ctrl adaptive.Controller, min, max, initial int64) *adaptive.Limiter {
	t.Helper()
	lim, err := adaptive.New(ctrl, adaptive.WithLimits(initial, min, max))
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	return lim
}

// evaluate runs adaptivetest.Evaluate with limiters built on controllers
// from newCtrl. It must run in a synctest bubble.
func evaluate(t *testing.T, newCtrl func() adaptive.Controller) adaptivetest.Report {
	return adaptivetest.Evaluate(func(min, max, initial int) adaptivetest.Limiter {
		return adaptivetest.Adapt(newLimiter(t, newCtrl(), int64(min), int64(max), int64(initial)))
	}, 0)
}

// fixed is a Controller that sets the limit to whatever its field says.
type fixed struct{ limit float64 }

func (f *fixed) Next(float64, adaptive.Sample) float64 { return f.limit }

// recorder is a Controller that keeps the samples it is given and leaves
// the limit as it is.
type recorder struct{ samples []adaptive.Sample }

func (r *recorder) Next(limit float64, s adaptive.Sample) float64 {
	r.samples = append(r.samples, s)
	return limit
}

// feed gives ctrl n samples of rtt with inFlight in flight, one request
// admitted per tick from start on, and returns the limit after them.
func feed(ctrl adaptive.Controller, limit float64, start time.Time, n int, rtt time.Duration, inFlight int64, dropped bool) (float64, time.Time) {
	for range n {
		limit = ctrl.Next(limit, adaptive.Sample{Start: start, RTT: rtt, InFlight: inFlight, Dropped: dropped})
		start = start.Add(rtt)
	}
	return limit, start
}
