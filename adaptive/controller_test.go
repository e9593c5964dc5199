package adaptive_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const ms = time.Millisecond

func TestAIMDGrowsByOnePerWindow(t *testing.T) {
	a := &adaptive.AIMD{Timeout: 50 * ms}
	// A congestion event ends the slow start: a limit of 20 decides every
	// 10 samples, and RTTs above the timeout back off to 18.
	l, at := feed(a, 20, t0, 10, 60*ms, 20, false)
	require.Equal(t, 18.0, l)
	// A limit of 18 decides every 9 samples.
	l, at = feed(a, l, at, 8, 20*ms, 18, false)
	require.Equal(t, 18.0, l, "no decision before the window is full")
	l, at = feed(a, l, at, 1, 20*ms, 18, false)
	require.Equal(t, 19.0, l)
	l, _ = feed(a, l, at, 10, 20*ms, 19, false)
	require.Equal(t, 20.0, l)
}

func TestAIMDSlowStartDoublesUntilCongestion(t *testing.T) {
	a := &adaptive.AIMD{Timeout: 50 * ms}
	l, at := feed(a, 1, t0, 1, 20*ms, 1, false)
	require.Equal(t, 2.0, l)
	l, at = feed(a, l, at, 1, 20*ms, 2, false)
	require.Equal(t, 4.0, l)
	l, at = feed(a, l, at, 2, 20*ms, 4, false)
	require.Equal(t, 8.0, l)
	l, at = feed(a, l, at, 4, 60*ms, 8, false)
	require.Equal(t, 7.2, l, "the first congestion event backs off")
	l, _ = feed(a, l, at, 4, 20*ms, 8, false)
	require.Equal(t, 8.2, l, "and ends the slow start")

	a = &adaptive.AIMD{Timeout: 50 * ms}
	l, at = feed(a, 4, t0, 2, 20*ms, 4, false)
	require.Equal(t, 8.0, l)
	l, at = feed(a, l, at, 4, 22*ms, 8, false)
	require.Equal(t, 16.0, l, "an RTT an eighth above the lowest or less: still doubling")
	l, at = feed(a, l, at, 8, 23*ms, 16, false)
	require.Equal(t, 17.0, l, "an RTT more than an eighth above the lowest ends the slow start: up by one")
	l, _ = feed(a, l, at, 9, 20*ms, 17, false)
	require.Equal(t, 18.0, l, "and by one from then on")
}

func TestAIMDDoesNotGrowAnUnusedLimit(t *testing.T) {
	l, _ := feed(&adaptive.AIMD{}, 10, t0, 50, 20*ms, 4, false)
	require.Equal(t, 10.0, l, "fewer than half the limit in flight")
}

func TestAIMDBacksOffOncePerCongestionEvent(t *testing.T) {
	tests := []struct {
		name    string
		rtt     time.Duration
		dropped bool
	}{
		{"drops", 20 * ms, true},
		{"RTTs above the timeout", 60 * ms, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &adaptive.AIMD{Timeout: 50 * ms, Backoff: 0.5}
			// 100 requests admitted together fail, every other one with
			// a drop: one event.
			l := 100.0
			for i := range 100 {
				l = a.Next(l, adaptive.Sample{Start: t0, RTT: tt.rtt, InFlight: 100, Dropped: tt.dropped && i%2 == 0})
			}
			require.Equal(t, 50.0, l)
			// Requests admitted after the backoff that fail again are news.
			l, at := feed(a, l, t0.Add(time.Second), 24, tt.rtt, 50, false)
			l, _ = feed(a, l, at, 1, tt.rtt, 50, tt.dropped)
			require.Equal(t, 25.0, l)
		})
	}
}

// TestControllersGoToTheMinimumWhenNothingCompletes feeds each controller,
// settled, as many drops in a row as its limit admits, as a service that
// fails every request gives: each goes to the minimum at once (1, which
// the Limiter raises to its own minimum), and so does a probe whose step
// completes nothing.
func TestControllersGoToTheMinimumWhenNothingCompletes(t *testing.T) {
	t.Run("AIMD", func(t *testing.T) {
		a := &adaptive.AIMD{}
		l, at := feed(a, 100, t0, 50, ms, 100, true)
		require.Equal(t, 90.0, l, "a window of drops: a congestion event")
		l, _ = feed(a, l, at, 40, ms, 100, true)
		require.Equal(t, 1.0, l, "90 drops in a row at a limit of 90")
	})
	for _, c := range []struct {
		name string
		ctrl func() adaptive.Controller
	}{
		{"Vegas", func() adaptive.Controller { return &adaptive.Vegas{ProbeMultiplier: 1000} }},
		{"Gradient2", func() adaptive.Controller { return &adaptive.Gradient2{} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctrl := c.ctrl()
			l, at := firstProbe(t, ctrl)
			l, at = feed(ctrl, l, at, 38, ms, 75, true)
			require.Less(t, l, 75.0, "a window of drops: a cut")
			require.Greater(t, l, 1.0, "a window of drops: a cut")
			l, _ = feed(ctrl, l, at, int(math.Ceil(l))-38, ms, 75, true)
			require.Equal(t, 1.0, l, "as many drops in a row as the limit admits")
		})
		t.Run(c.name+"/in a probe", func(t *testing.T) {
			ctrl := c.ctrl()
			l, at := startProbe(t, ctrl)
			l, _ = feed(ctrl, l, at, 75, 100*ms, 75, true)
			require.Equal(t, 1.0, l, "a step of drops ends the probe at the minimum")
		})
	}
}

// TestControllersHoldAnRTTTheClockCannotResolve feeds each delay-based
// controller samples of RTT 0 from the start, as a service faster than the
// clock gives: the limit never falls, and grows while it is used.
func TestControllersHoldAnRTTTheClockCannotResolve(t *testing.T) {
	for _, c := range []struct {
		name string
		ctrl adaptive.Controller
	}{
		{"Vegas", &adaptive.Vegas{}},
		{"Gradient2", &adaptive.Gradient2{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, at := 100.0, t0
			for range 20000 {
				next := c.ctrl.Next(l, adaptive.Sample{Start: at, RTT: 0, InFlight: int64(l)})
				require.GreaterOrEqual(t, next, l)
				l = next
				at = at.Add(ms)
			}
			require.Greater(t, l, 500.0, "grows")
		})
	}
}

// firstProbe runs the first probe of c, a Vegas or a Gradient2, which
// share it: it measures an unloaded RTT of 20 ms and leaves the limit at 75.
// It returns that limit and the time c's next sample may start.
func firstProbe(t *testing.T, c adaptive.Controller) (float64, time.Time) {
	l, at := startProbe(t, c)
	l, at = feed(c, l, at, 75, 20*ms, 75, false)
	require.Equal(t, 56.25, l, "the first probe takes a second step, having no unloaded RTT to compare with")
	l, at = feed(c, l, at, 57, 20*ms, 56, false)
	require.Equal(t, 75.0, l, "the probe ends at the largest limit that did not queue")
	return l, at
}

// startProbe gives c, a Vegas or a Gradient2, a first window at a limit
// of 100 with all of it in flight, which starts its first probe at three
// quarters of the limit. It returns that limit and the time c's next
// sample may start.
func startProbe(t *testing.T, c adaptive.Controller) (float64, time.Time) {
	l, at := feed(c, 100, t0, 49, 20*ms, 100, false)
	require.Equal(t, 100.0, l, "no decision before the first window is complete")
	l, at = feed(c, l, at, 1, 20*ms, 100, false)
	require.Equal(t, 75.0, l, "the first window that fills the limit starts a probe at three quarters of it")
	return l, at
}

// settledVegas runs v's first probe, which measures an rttNoLoad of 20 ms,
// and returns the time its next sample may start.
func settledVegas(t *testing.T, v *adaptive.Vegas) time.Time {
	_, at := firstProbe(t, v)
	return at
}

func TestVegasStepsByTheQueueItEstimates(t *testing.T) {
	tests := []struct {
		name     string
		rtt      time.Duration
		inFlight int64
		dropped  bool
		want     float64
	}{
		// limit 100: log10 = 2, alpha = 6, beta = 12; rttNoLoad 20 ms.
		{"no queue: up by beta", 20 * ms, 100, false, 112},
		{"queue 4, below alpha: up by log10", 21 * ms, 100, false, 102},
		{"queue 9, between alpha and beta: hold", 22 * ms, 100, false, 100},
		{"queue 17, above beta: down by log10", 24 * ms, 100, false, 98},
		{"a drop among completions: down by log10", 20 * ms, 100, true, 98},
		{"application-limited: hold", 20 * ms, 40, false, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &adaptive.Vegas{ProbeMultiplier: 1000}
			at := settledVegas(t, v)
			l, at := feed(v, 100, at, 49, tt.rtt, tt.inFlight, false)
			l, _ = feed(v, l, at, 1, tt.rtt, tt.inFlight, tt.dropped)
			require.Equal(t, tt.want, l)
		})
	}
}

func TestVegasSmoothingBlendsTheStep(t *testing.T) {
	v := &adaptive.Vegas{Smoothing: 0.5, ProbeMultiplier: 1000}
	at := settledVegas(t, v)
	l, _ := feed(v, 100, at, 50, 20*ms, 100, false)
	require.Equal(t, 106.0, l)
}

func TestVegasTakesAFasterWindowAsRTTNoLoad(t *testing.T) {
	v := &adaptive.Vegas{ProbeMultiplier: 1000}
	at := settledVegas(t, v)
	// The service now answers in 10 ms: a window at 10 ms lowers
	// rttNoLoad, so that 11 ms is a queue of 10, between alpha and beta,
	// not a window faster than the unloaded RTT.
	l, at := feed(v, 100, at, 50, 10*ms, 100, false)
	require.Equal(t, 112.0, l)
	l, _ = feed(v, 100, at, 50, 11*ms, 100, false)
	require.Equal(t, 100.0, l)
}

// queueingService returns the RTT of a service of the given capacity and
// an unloaded RTT of 20 ms at a limit, all of it in flight: flat up to the
// capacity, and in proportion to the limit beyond.
func queueingService(capacity float64) func(limit float64) time.Duration {
	return func(limit float64) time.Duration {
		return time.Duration(float64(20*ms) * max(1, limit/capacity))
	}
}

// drive runs ctrl for n samples against rttAt with the whole limit in
// flight, from limit and start, and returns every distinct limit it set
// and the time the next sample may start.
func drive(ctrl adaptive.Controller, rttAt func(float64) time.Duration, limit float64, start time.Time, n int) ([]float64, time.Time) {
	limits := []float64{limit}
	for range n {
		rtt := rttAt(limit)
		limit = ctrl.Next(limit, adaptive.Sample{Start: start, RTT: rtt, InFlight: int64(limit)})
		start = start.Add(rtt)
		if limit != limits[len(limits)-1] {
			limits = append(limits, limit)
		}
	}
	return limits, start
}

func TestVegasProbeFindsTheUnloadedRTT(t *testing.T) {
	limits, _ := drive(&adaptive.Vegas{}, queueingService(100), 800, t0, 3000)
	// The first probe steps down by three quarters until two steps agree,
	// at 106 and 80 in flight. It leaves the largest limit whose queue,
	// by Vegas's estimate against the RTT it found, is within beta: 106,
	// whose RTT of 21.4 ms gives a queue of 7, between alpha and beta.
	require.Equal(t, []float64{800, 600, 450, 337.5, 253.125, 189.84375, 142.3828125, 106.787109375, 80.09033203125, 106.787109375}, limits[:10])
	last := limits[len(limits)-1]
	require.True(t, last >= 106 && last <= 112, "settled at %v, with a queue between alpha and beta: %v", last, limits)
}

func TestVegasReprobeDoesNotAdoptAQueuedRTT(t *testing.T) {
	// Settled on a service of capacity 100, Vegas keeps a queue of 6 to 12.
	v := &adaptive.Vegas{}
	limits, at := drive(v, queueingService(100), 100, t0, 5000)
	require.InDelta(t, 106, limits[len(limits)-1], 6, "%v", limits)
	// The capacity halves: every RTT from now on is queued until the limit
	// falls to 50. The probes of the next 15 000 samples (a probe every
	// 15 to 30 limits' worth) measure the unloaded RTT below the capacity,
	// so the limit settles with a queue of alpha to beta (3 to 6 below a
	// limit of 100) instead of taking a queued RTT for the unloaded one
	// and holding or climbing.
	limits, at = drive(v, queueingService(50), limits[len(limits)-1], at, 15000)
	tail, _ := drive(v, queueingService(50), limits[len(limits)-1], at, 5000)
	require.Less(t, slices.Max(tail), 58.0, "the last 5000 samples: %v, after %v", tail, limits)
	require.Greater(t, slices.Min(tail), 37.0, "the last 5000 samples: %v, after %v", tail, limits)
}

// settledGradient2 returns a Gradient2 whose first probe has measured a
// baseline of 20 ms, the limit it left, and the time its next sample may
// start.
func settledGradient2(t *testing.T) (*adaptive.Gradient2, float64, time.Time) {
	g := &adaptive.Gradient2{}
	l, at := firstProbe(t, g)
	return g, l, at
}

func TestGradient2FollowsTheRTTAgainstItsBaseline(t *testing.T) {
	tests := []struct {
		name     string
		rtt      time.Duration
		inFlight int64
		dropped  bool
		want     float64 // from 75
	}{
		{"no queue: up by the headroom", 20 * ms, 75, false, 79},
		{"lower half of the tolerated band: up", 21 * ms, 75, false, 79},
		{"upper half of the tolerated band: hold", 22 * ms, 75, false, 75},
		{"beyond the band: down by half the excess", 33 * ms, 75, false, 75 * (0.5 + 0.5*22.0/33)},
		{"far beyond: gradient clamped at 0.5", 200 * ms, 75, false, 75 * 0.75},
		{"a drop among completions: gradient 0.5", 20 * ms, 75, true, 75 * 0.75},
		{"application-limited: hold", 60 * ms, 30, false, 75},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, l, at := settledGradient2(t)
			l, at = feed(g, l, at, 37, tt.rtt, tt.inFlight, false)
			l, _ = feed(g, l, at, 1, tt.rtt, tt.inFlight, tt.dropped)
			require.InDelta(t, tt.want, l, 1e-9)
		})
	}
}

func TestGradient2ProbeFindsTheUnloadedRTT(t *testing.T) {
	// The service queues above 100 requests: its RTT is 20 ms up to 100 in
	// flight and grows in proportion beyond.
	rttAt := func(limit float64) time.Duration {
		return time.Duration(float64(20*ms) * max(1, limit/100))
	}
	g := &adaptive.Gradient2{}
	l, at := 800.0, t0
	limits := []float64{l}
	for range 3000 {
		rtt := rttAt(l)
		l = g.Next(l, adaptive.Sample{Start: at, RTT: rtt, InFlight: int64(l)})
		at = at.Add(rtt)
		if l != limits[len(limits)-1] {
			limits = append(limits, l)
		}
	}
	// Each step takes three quarters of the last; the RTT falls with the
	// limit down to 106 in flight, and the probe stops once two steps
	// agree, at 106 and 80. The limit before the probe is unknown, so
	// the probe leaves the largest limit whose RTT was within tolerance
	// of the baseline it found, and the gradient takes over from there.
	require.Equal(t, []float64{800, 600, 450, 337.5, 253.125, 189.84375, 142.3828125, 106.787109375, 80.09033203125, 106.787109375}, limits[:10])
	require.InDelta(t, 110, limits[len(limits)-1], 5, "settled %v", limits)
}
