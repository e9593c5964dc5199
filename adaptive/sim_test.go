package adaptive_test

import (
	"math"
	"math/rand/v2"
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
// about a fifth over the figures measured.
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
		{"AIMD", func() adaptive.Controller { return &adaptive.AIMD{Timeout: 22 * time.Millisecond} },
			2600, 12500, 1000, 2400, 2},
		{"Vegas", func() adaptive.Controller { return &adaptive.Vegas{} },
			750, 8400, 1600, 450, 2},
		{"Gradient2", func() adaptive.Controller { return &adaptive.Gradient2{} },
			1100, 8400, 1050, 700, 2},
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

// netflixVegas is Vegas as Netflix's VegasLimit learns rttNoLoad: the
// smallest RTT of any sample, replaced every 30 × limit samples (times a
// jitter in [0.5, 1)) by the RTT of the next sample, whatever it is. Its
// rule is the one adaptive.Vegas keeps: queue = limit × (1 − rttNoLoad/rtt),
// +6 log10 while the queue is at most log10(limit), +log10 below 3 log10,
// −log10 above 6 log10 or on a drop, nothing while fewer than half the
// limit are in flight. Netflix's takes every sample; with windowed set, the
// port decides once per window of the samples of requests admitted since
// the last decision, as this package's controllers do, which isolates the
// way rttNoLoad is learnt as the cause of what it does.
type netflixVegas struct {
	windowed  bool
	rttNoLoad time.Duration
	probes    int // samples since rttNoLoad was last replaced
	jitter    float64
	rng       rand.PCG
	seeded    bool

	since   time.Time // the window: requests admitted earlier are not counted
	n, ok   int
	sum     time.Duration
	highest int64
	dropped bool
}

func (v *netflixVegas) Next(limit float64, s adaptive.Sample) float64 {
	const probeMultiplier = 30
	if !v.seeded {
		v.rng.Seed(uint64(s.Start.UnixNano()), 0x9e3779b97f4a7c15)
		v.seeded = true
		v.resetProbe()
	}
	v.probes++
	if v.jitter*probeMultiplier*limit <= float64(v.probes) {
		v.resetProbe()
		v.rttNoLoad = s.RTT
		v.restart(s.End())
		return limit
	}
	if !v.windowed {
		if v.rttNoLoad == 0 || s.RTT < v.rttNoLoad {
			v.rttNoLoad = s.RTT
			return limit
		}
	} else {
		if !s.Dropped && s.RTT > 0 && (v.rttNoLoad == 0 || s.RTT < v.rttNoLoad) {
			v.rttNoLoad = s.RTT
		}
		if s.Start.Before(v.since) {
			return limit
		}
		v.n++
		v.highest = max(v.highest, s.InFlight)
		v.dropped = v.dropped || s.Dropped
		if !s.Dropped {
			v.ok++
			v.sum += s.RTT
		}
		if float64(v.n) < min(100, max(1, limit/2)) {
			return limit
		}
		w := adaptive.Sample{InFlight: v.highest, Dropped: v.dropped}
		if v.ok > 0 {
			w.RTT = v.sum / time.Duration(v.ok)
		}
		v.restart(s.End())
		if v.rttNoLoad == 0 {
			return limit
		}
		s = w
	}

	lg := max(1, math.Floor(math.Log10(limit)))
	queue := math.Ceil(limit * (1 - float64(v.rttNoLoad)/float64(s.RTT)))
	switch {
	case s.Dropped:
		return max(1, limit-lg)
	case float64(s.InFlight)*2 < limit:
		return limit
	case queue <= lg:
		return limit + 6*lg
	case queue < 3*lg:
		return limit + lg
	case queue > 6*lg:
		return max(1, limit-lg)
	}
	return limit
}

func (v *netflixVegas) resetProbe() {
	v.probes = 0
	v.jitter = 0.5 + 0.5*float64(v.rng.Uint64()>>11)/(1<<53)
}

func (v *netflixVegas) restart(at time.Time) {
	v.since = at
	v.n, v.ok, v.sum, v.highest, v.dropped = 0, 0, 0, 0, false
}

// TestVegasUnlearnsAQueue runs Netflix's Vegas, per sample and per window,
// and this package's, from a limit far above capacity and through a halving
// of the capacity (C = 100, 20 ms unloaded, 2 × offered, 4 s a phase).
// Netflix's takes the smallest RTT it has seen as the unloaded one, and a
// service queued from its first request never shows it one; replacing it
// periodically by the next sample's RTT adopts a queued RTT. Per window,
// where only that differs from this package's Vegas, the limit stays far
// above capacity with every request waiting out the queue, and stays above
// the band once the capacity halves; per sample, it also swings between a
// few and hundreds and settles in neither run. This package's measures
// rttNoLoad in a probe at a lower limit, and settles in both.
func TestVegasUnlearnsAQueue(t *testing.T) {
	const c = adaptivetest.Capacity
	svc := adaptivetest.ServiceTime
	tests := []struct {
		name  string
		ctrl  func() adaptive.Controller
		check func(t *testing.T, above, halved adaptivetest.PhaseResult)
	}{
		{"Netflix", func() adaptive.Controller { return &netflixVegas{} },
			func(t *testing.T, above, halved adaptivetest.PhaseResult) {
				require.Equal(t, -1, above.Settle, "settles from above")
				require.Equal(t, -1, halved.Settle, "settles after halving")
				require.Greater(t, above.P99, 4*svc, "p99")
			}},
		{"Netflix, per window", func() adaptive.Controller { return &netflixVegas{windowed: true} },
			func(t *testing.T, above, halved adaptivetest.PhaseResult) {
				require.Greater(t, above.MinLimit, 5*c, "the limit stays far above capacity")
				require.Greater(t, above.P50, 5*svc, "every request waits out the queue")
				require.Greater(t, halved.MinLimit, c/2*5/4, "the limit stays above the band")
			}},
		{"this package", func() adaptive.Controller { return &adaptive.Vegas{} },
			func(t *testing.T, above, halved adaptivetest.PhaseResult) {
				require.GreaterOrEqual(t, above.Settle, 0, "settles from above")
				require.GreaterOrEqual(t, halved.Settle, 0, "settles after halving")
				require.LessOrEqual(t, max(above.P99, halved.P99), 2*svc, "p99")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				run := func(initial int64, capacities ...int) []adaptivetest.PhaseResult {
					cfg := adaptivetest.Config{ServiceTime: svc}
					for _, c := range capacities {
						cfg.Phases = append(cfg.Phases, adaptivetest.Phase{Duration: adaptivetest.PhaseLength, Capacity: c, Offered: adaptivetest.Offered})
					}
					lim := newLimiter(t, tt.ctrl(), adaptivetest.MinLimit, adaptivetest.MaxLimit, initial)
					return adaptivetest.Run(adaptivetest.Adapt(lim), cfg)
				}
				above := run(adaptivetest.MaxLimit, c)[0]
				halved := run(c, c, c/2)[1]
				t.Logf("from above: limit %d to %d, p50 %v, p99 %v, settled after %d samples; after halving: limit %d to %d, p99 %v, settled after %d samples",
					above.MinLimit, above.MaxLimit, above.P50, above.P99, above.Settle, halved.MinLimit, halved.MaxLimit, halved.P99, halved.Settle)
				tt.check(t, above, halved)
			})
		})
	}
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
