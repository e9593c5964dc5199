package adaptive_test

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptive/adaptivetest"
)

// TestSimulation runs each controller through adaptivetest.Evaluate: a
// service of capacity C = 100 and unloaded latency 20 ms, offered 2 × C,
// with the limit starting far below C, far above it, and following C as it
// halves and doubles. docs/adaptive.md tabulates the figures.
//
// The bounds below are the ones the documentation states, with a margin of
// about a fifth over the figures measured. Vegas, as Netflix defines it,
// does not meet every criterion: its rows record where it falls short (see
// TestVegasCannotUnlearnAQueue for why).
func TestSimulation(t *testing.T) {
	const never = -1
	tests := []struct {
		name     string
		ctrl     func() adaptive.Controller
		below    int // samples to settle, at most; never for not settled
		above    int
		halved   int
		doubled  int
		p99Ratio float64 // at most
	}{
		{"AIMD", func() adaptive.Controller { return &adaptive.AIMD{Timeout: 24 * time.Millisecond} },
			4500, 12500, 1000, 2200, 2},
		{"Vegas", func() adaptive.Controller { return &adaptive.Vegas{} },
			800, never, never, 400, 6},
		{"Gradient2", func() adaptive.Controller { return &adaptive.Gradient2{} },
			1100, 6500, 800, 700, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := evaluate(t, tt.ctrl)
				t.Log(r)
				for _, c := range []struct {
					what      string
					got, want int
				}{
					{"from below", r.FromBelow, tt.below},
					{"from above", r.FromAbove, tt.above},
					{"after halving", r.Halved, tt.halved},
					{"after doubling", r.Doubled, tt.doubled},
				} {
					if c.want == never {
						require.Equal(t, never, c.got, "settles %s", c.what)
						continue
					}
					require.GreaterOrEqual(t, c.got, 0, "does not settle %s", c.what)
					require.LessOrEqual(t, c.got, c.want, "settles %s", c.what)
				}
				require.GreaterOrEqual(t, r.Goodput, 0.9, "goodput")
				require.LessOrEqual(t, r.P99Ratio(), tt.p99Ratio, "p99")
			})
		})
	}
}

// TestVegasCannotUnlearnAQueue shows why Vegas does not settle from far
// above: its unloaded RTT is the smallest it has seen, and a service
// queued from the first request never shows one; its periodic reprobe
// only takes the current, queued RTT as the new unloaded one.
func TestVegasCannotUnlearnAQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := evaluate(t, func() adaptive.Controller { return &adaptive.Vegas{} })
		above := r.Runs["above"][0]
		require.Greater(t, above.MinLimit, 5*adaptivetest.Capacity, "the limit stays far above capacity")
		require.Greater(t, above.P50, 5*adaptivetest.ServiceTime, "every request waits out a queue")
	})
}

// netflixGradient2 is Gradient2 as Netflix's Gradient2Limit defines it,
// taking every sample: a long exponential average of the RTT (600
// samples, the first 10 a plain mean) as the baseline, the queue term added
// whatever the gradient, and drops not looked at. With pr134 set it
// makes the change proposed in Netflix/concurrency-limits#134 as well: the
// queue term only when the gradient is 1, and a drop as a gradient of 0.5.
type netflixGradient2 struct {
	pr134 bool
	long  float64
	n     int
}

func (g *netflixGradient2) Next(limit float64, s adaptive.Sample) float64 {
	const (
		queue     = 4
		smoothing = 0.2
		tolerance = 1.5
		window    = 600
		warmup    = 10
	)
	short := float64(s.RTT)
	if g.n < warmup {
		g.n++
		g.long += (short - g.long) / float64(g.n)
	} else {
		g.long += (short - g.long) * 2 / (window + 1)
	}
	if g.long/short > 2 {
		g.long *= 0.95
	}
	if float64(s.InFlight) < limit/2 {
		return limit
	}
	gradient := math.Max(0.5, math.Min(1, tolerance*g.long/short))
	next := limit * gradient
	switch {
	case g.pr134 && s.Dropped:
		next = limit * 0.5
	case !g.pr134 || gradient == 1:
		next += queue
	}
	return limit*(1-smoothing) + next*smoothing
}

// TestGradient2GrowthIsBounded runs the Gradient2s of Netflix's and this
// package's for 20 s of 2 × overload from the same start. Netflix's
// grows to the limiter's maximum within seconds; its #134 variant climbs
// more slowly, until the service's timeouts cut it down, and then climbs
// again: the long average takes in the queueing delay the higher limit
// causes, so the RTT never looks high for long. This package's settles near C and
// stays there.
func TestGradient2GrowthIsBounded(t *testing.T) {
	tests := []struct {
		name     string
		ctrl     adaptive.Controller
		maxAtEnd int // the largest limit in the last 4 s, at most
		minAtEnd int // and at least
	}{
		{"Netflix", &netflixGradient2{}, 1000, 1000},
		{"Netflix with #134", &netflixGradient2{pr134: true}, 1000, 400},
		{"this package", &adaptive.Gradient2{}, 125, 75},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := newLimiter(t, tt.ctrl, adaptivetest.MinLimit, adaptivetest.MaxLimit, 20)
				res := adaptivetest.Run(adaptivetest.Adapt(lim), adaptivetest.Config{
					ServiceTime: adaptivetest.ServiceTime,
					Phases: []adaptivetest.Phase{
						{Duration: 12 * time.Second, Capacity: adaptivetest.Capacity, Offered: 2},
						{Duration: 8 * time.Second, Capacity: adaptivetest.Capacity, Offered: 2},
					},
				})
				end := res[1]
				t.Logf("last 4 s: limit %d to %d, p99 %v", end.MinLimit, end.MaxLimit, end.P99)
				require.LessOrEqual(t, end.MaxLimit, tt.maxAtEnd)
				require.GreaterOrEqual(t, end.MaxLimit, tt.minAtEnd)
			})
		})
	}
}
