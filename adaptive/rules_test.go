package adaptive_test

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
)

// The tests of this file feed the controllers exact samples, one rule at a
// time: the rules that the scenarios through the real stack
// (TestWireScenariosInFakeTime, and TestWireScenarios over loopback) showed
// to be needed.

// delayBased returns a fresh Vegas and a fresh Gradient2, by name.
func delayBased() map[string]func() adaptive.Controller {
	return map[string]func() adaptive.Controller{
		"Vegas":     func() adaptive.Controller { return &adaptive.Vegas{} },
		"Gradient2": func() adaptive.Controller { return &adaptive.Gradient2{} },
	}
}

// TestProbesLeaveAnUnfilledLimit feeds each delay-based controller the
// quiet hours of a service: one request in flight at a time, for a hundred
// thousand requests, at RTTs of 20 ms and at RTTs the clock cannot resolve.
// The load never fills the limit, so no probe lowers it, whether the
// controller has measured the service yet or not: the morning finds the
// limit the night began with.
func TestProbesLeaveAnUnfilledLimit(t *testing.T) {
	for name, ctrl := range delayBased() {
		for _, rtt := range []time.Duration{20 * ms, 0} {
			t.Run(name+"/fresh/rtt "+rtt.String(), func(t *testing.T) {
				c := ctrl()
				l := 100.0
				at := t0
				for range 100_000 {
					l = c.Next(l, adaptive.Sample{Start: at, RTT: rtt, InFlight: 1})
					require.Equal(t, 100.0, l)
					at = at.Add(max(rtt, ms))
				}
			})
		}
		t.Run(name+"/settled", func(t *testing.T) {
			c := ctrl()
			l, at := firstProbe(t, c)
			for range 100_000 {
				l = c.Next(l, adaptive.Sample{Start: at, RTT: 20 * ms, InFlight: 1})
				require.Equal(t, 75.0, l)
				at = at.Add(20 * ms)
			}
		})
	}
}

// TestControllersFollowASlowerService settles each delay-based controller
// on a service of 20 ms, which then takes 200 ms whatever the load: a
// slower service, not a queue. The first windows cut the limit, as a queue
// would; once the cuts add up to a quarter of the limit and the RTT has
// not fallen, no queue of the limit's made it, and the controller takes
// 200 ms for the service's latency and grows the limit back, instead of
// cutting window after window to the minimum until its next probe.
func TestControllersFollowASlowerService(t *testing.T) {
	slow := func(float64) time.Duration { return 200 * ms }
	for name, ctrl := range delayBased() {
		t.Run(name, func(t *testing.T) {
			c := ctrl()
			_, at := firstProbe(t, c)
			limits, _ := drive(c, slow, 75, at, 3000)
			require.Less(t, limits[1], 75.0, "the first window cuts, as for a queue: %v", limits)
			low := limits[0]
			for _, l := range limits {
				low = min(low, l)
			}
			require.Greater(t, low, 50.0, "the cuts stop at a quarter: %v", limits)
			require.GreaterOrEqual(t, limits[len(limits)-1], 75.0, "and the limit grows back: %v", limits)
		})
	}
}

// TestControllersRestartFromAFailure settles each controller on a service
// of capacity 400, fails every request until the limit is at its minimum,
// and then serves every request again as before: the limit doubles every
// window up to half what it was before the failure, as TCP restarts after
// a timeout, and is there within ten windows, where the controllers' own
// steps (one a window for AIMD, four for Gradient2, six to eighteen for
// Vegas) would take from twenty to two hundred.
func TestControllersRestartFromAFailure(t *testing.T) {
	ctrls := map[string]func() adaptive.Controller{
		"AIMD": func() adaptive.Controller { return &adaptive.AIMD{Timeout: 25 * ms} },
	}
	for name, ctrl := range delayBased() {
		ctrls[name] = ctrl
	}
	for name, ctrl := range ctrls {
		t.Run(name, func(t *testing.T) {
			c := ctrl()
			limits, at := drive(c, queueingService(400), 20, t0, 20000)
			before := limits[len(limits)-1]
			require.Greater(t, before, 300.0, "settled near the capacity: %v", limits)
			l, at := feed(c, before, at, 2*int(before), 20*ms, int64(before), true)
			require.Equal(t, 1.0, l, "nothing completed: at the minimum")
			windows := 0
			for l < before/2 {
				n := int(math.Ceil(max(1, l/2)))
				next, nextAt := feed(c, l, at, n, 20*ms, int64(l), false)
				require.LessOrEqual(t, next, max(2*l, l+18), "at most doubling")
				l, at = next, nextAt
				windows++
				require.LessOrEqual(t, windows, 10, "half the limit before the failure, %v, within ten windows; at %v", before/2, l)
			}
		})
	}
}

// TestAFewDropsAreNoFailure gives each controller, at a limit of 6, a
// window of 3 drops, the requests an overloaded service's queue timed out
// before it answered those it served: one congestion event, a cut, not a
// service that fails every request. A limit's worth of drops in a row are.
func TestAFewDropsAreNoFailure(t *testing.T) {
	ctrls := map[string]func(t *testing.T) (adaptive.Controller, time.Time){
		"AIMD": func(*testing.T) (adaptive.Controller, time.Time) {
			return &adaptive.AIMD{Timeout: 50 * ms}, t0
		},
	}
	for name, ctrl := range delayBased() {
		ctrls[name] = func(t *testing.T) (adaptive.Controller, time.Time) {
			c := ctrl()
			_, at := firstProbe(t, c)
			return c, at
		}
	}
	for name, settle := range ctrls {
		t.Run(name, func(t *testing.T) {
			c, at := settle(t)
			l, at := feed(c, 6, at, 3, 20*ms, 6, true)
			require.Greater(t, l, 1.0, "a window of 3 drops is a cut, not a failure")
			require.Less(t, l, 6.0, "a cut")
			l, _ = feed(c, l, at, int(math.Ceil(max(1, l/2))), 20*ms, int64(l), true)
			require.Equal(t, 1.0, l, "six drops in a row are a failure")
		})
	}
}

// TestInconclusiveCountsPastTheLatencyBound ends permits Inconclusive
// before and after the latency bound, which WithLatencyBound sets, or the
// controller through its LatencyBound method, in a bubble: past the bound
// a permit is a drop the controller sees, within it an Ignored permit the
// controller does not see, and without a bound every one is Ignored.
func TestInconclusiveCountsPastTheLatencyBound(t *testing.T) {
	tests := []struct {
		name   string
		ctrl   adaptive.Controller
		opts   []adaptive.Option
		bound  time.Duration // 0: none
		settle bool          // give the controller a window of 20 ms first
	}{
		{"WithLatencyBound", &recorder{}, []adaptive.Option{adaptive.WithLatencyBound(50 * ms)}, 50 * ms, false},
		{"WithLatencyBound over the controller's", &bounded{bound: 50 * ms}, []adaptive.Option{adaptive.WithLatencyBound(10 * ms)}, 10 * ms, false},
		{"the controller's LatencyBound", &bounded{bound: 50 * ms}, nil, 50 * ms, false},
		{"no bound", &recorder{}, nil, 0, false},
		{"Gradient2 before it measures", &adaptive.Gradient2{}, nil, 0, false},
		{"AIMD's Timeout", &adaptive.AIMD{Timeout: 22 * ms}, nil, 88 * ms, false},
		{"AIMD after a window at 20 ms", &adaptive.AIMD{}, nil, 80 * ms, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim, err := adaptive.New(tt.ctrl, append([]adaptive.Option{adaptive.WithLimits(1, 1, 10)}, tt.opts...)...)
				require.NoError(t, err)
				defer lim.Close()
				end := func(after time.Duration, o adaptive.Outcome) {
					var p adaptive.Permit
					require.True(t, lim.TryAcquire(&p))
					time.Sleep(after)
					p.End(o)
				}
				if tt.settle {
					end(20*ms, adaptive.Succeeded)
				}
				before := lim.Stats()
				if tt.bound == 0 {
					end(time.Hour, adaptive.Inconclusive)
					st := lim.Stats()
					require.Equal(t, before.Ignored+1, st.Ignored, "no bound: Ignored")
					require.Equal(t, before.Dropped, st.Dropped)
					return
				}
				end(tt.bound, adaptive.Inconclusive)
				st := lim.Stats()
				require.Equal(t, before.Ignored+1, st.Ignored, "at the bound: Ignored")
				end(tt.bound+time.Nanosecond, adaptive.Inconclusive)
				st = lim.Stats()
				require.Equal(t, before.Dropped+1, st.Dropped, "past the bound: Dropped")
				require.Equal(t, before.Ignored+1, st.Ignored)
				if r, ok := tt.ctrl.(*bounded); ok {
					require.Len(t, r.samples, 1, "the controller sees the drop, and only it")
					require.True(t, r.samples[0].Dropped)
					require.Equal(t, tt.bound+time.Nanosecond, r.samples[0].RTT)
				}
			})
		})
	}
}

// bounded is a recorder with a LatencyBound method.
type bounded struct {
	bound time.Duration
	recorder
}

func (b *bounded) LatencyBound() time.Duration { return b.bound }

// TestLatencyBounds checks each controller's LatencyBound: about four
// times the latency of a request that does not queue, once measured.
func TestLatencyBounds(t *testing.T) {
	g := &adaptive.Gradient2{}
	require.Zero(t, g.LatencyBound(), "Gradient2, before it measures")
	firstProbe(t, g)
	require.Equal(t, 88*ms, g.LatencyBound(), "Gradient2: 4 × Tolerance × the baseline of 20 ms")

	v := &adaptive.Vegas{}
	require.Zero(t, v.LatencyBound(), "Vegas, before it measures")
	firstProbe(t, v)
	require.Equal(t, 80*ms, v.LatencyBound(), "Vegas: 4 × an rttNoLoad of 20 ms")

	require.Equal(t, 88*ms, (&adaptive.AIMD{Timeout: 22 * ms}).LatencyBound(), "AIMD: 4 × Timeout")
	a := &adaptive.AIMD{}
	require.Zero(t, a.LatencyBound(), "AIMD without Timeout, before a window completes")
	feed(a, 10, t0, 5, 20*ms, 10, false)
	require.Equal(t, 80*ms, a.LatencyBound(), "AIMD without Timeout: 4 × the lowest window's mean RTT")
}
