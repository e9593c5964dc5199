package adaptive_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/atomicsem"
)

func TestNewRejectsBadSettings(t *testing.T) {
	tests := []struct {
		name string
		ctrl adaptive.Controller
		opts []adaptive.Option
		want error
	}{
		{"min zero", nil, []adaptive.Option{adaptive.WithLimits(5, 0, 10)}, adaptive.ErrInvalidLimits},
		{"initial below min", nil, []adaptive.Option{adaptive.WithLimits(4, 5, 10)}, adaptive.ErrInvalidLimits},
		{"initial above max", nil, []adaptive.Option{adaptive.WithLimits(11, 1, 10)}, adaptive.ErrInvalidLimits},
		{"max above MaxPermits", nil, []adaptive.Option{adaptive.WithLimits(1, 1, atomicsem.MaxPermits+1)}, adaptive.ErrInvalidLimits},
		{"AIMD backoff 1", &adaptive.AIMD{Backoff: 1}, nil, adaptive.ErrInvalidController},
		{"AIMD backoff 0.4", &adaptive.AIMD{Backoff: 0.4}, nil, adaptive.ErrInvalidController},
		{"AIMD negative timeout", &adaptive.AIMD{Timeout: -time.Second}, nil, adaptive.ErrInvalidController},
		{"Vegas alpha above beta", &adaptive.Vegas{Alpha: 5, Beta: 4}, nil, adaptive.ErrInvalidController},
		{"Vegas negative alpha", &adaptive.Vegas{Alpha: -1}, nil, adaptive.ErrInvalidController},
		{"Vegas smoothing above 1", &adaptive.Vegas{Smoothing: 1.5}, nil, adaptive.ErrInvalidController},
		{"Vegas negative probe", &adaptive.Vegas{ProbeMultiplier: -1}, nil, adaptive.ErrInvalidController},
		{"Gradient2 tolerance below 1", &adaptive.Gradient2{Tolerance: 0.9}, nil, adaptive.ErrInvalidController},
		{"Gradient2 smoothing negative", &adaptive.Gradient2{Smoothing: -0.1}, nil, adaptive.ErrInvalidController},
		{"Gradient2 negative headroom", &adaptive.Gradient2{Headroom: -1}, nil, adaptive.ErrInvalidController},
		{"Gradient2 negative probe interval", &adaptive.Gradient2{ProbeInterval: -1}, nil, adaptive.ErrInvalidController},
		{"AIMD backoff NaN", &adaptive.AIMD{Backoff: nan}, nil, adaptive.ErrInvalidController},
		{"AIMD backoff +Inf", &adaptive.AIMD{Backoff: inf}, nil, adaptive.ErrInvalidController},
		{"AIMD backoff -Inf", &adaptive.AIMD{Backoff: -inf}, nil, adaptive.ErrInvalidController},
		{"Vegas smoothing NaN", &adaptive.Vegas{Smoothing: nan}, nil, adaptive.ErrInvalidController},
		{"Vegas smoothing +Inf", &adaptive.Vegas{Smoothing: inf}, nil, adaptive.ErrInvalidController},
		{"Vegas smoothing -Inf", &adaptive.Vegas{Smoothing: -inf}, nil, adaptive.ErrInvalidController},
		{"Vegas negative beta", &adaptive.Vegas{Beta: -1}, nil, adaptive.ErrInvalidController},
		{"Gradient2 tolerance NaN", &adaptive.Gradient2{Tolerance: nan}, nil, adaptive.ErrInvalidController},
		{"Gradient2 tolerance +Inf", &adaptive.Gradient2{Tolerance: inf}, nil, adaptive.ErrInvalidController},
		{"Gradient2 tolerance -Inf", &adaptive.Gradient2{Tolerance: -inf}, nil, adaptive.ErrInvalidController},
		{"Gradient2 smoothing NaN", &adaptive.Gradient2{Smoothing: nan}, nil, adaptive.ErrInvalidController},
		{"Gradient2 smoothing above 1", &adaptive.Gradient2{Smoothing: 1.5}, nil, adaptive.ErrInvalidController},
		{"Gradient2 smoothing +Inf", &adaptive.Gradient2{Smoothing: inf}, nil, adaptive.ErrInvalidController},
		{"Gradient2 headroom NaN", &adaptive.Gradient2{Headroom: nan}, nil, adaptive.ErrInvalidController},
		{"Gradient2 headroom +Inf", &adaptive.Gradient2{Headroom: inf}, nil, adaptive.ErrInvalidController},
		{"Gradient2 headroom -Inf", &adaptive.Gradient2{Headroom: -inf}, nil, adaptive.ErrInvalidController},
		{"Gradient2 probe interval NaN", &adaptive.Gradient2{ProbeInterval: nan}, nil, adaptive.ErrInvalidController},
		{"Gradient2 probe interval +Inf", &adaptive.Gradient2{ProbeInterval: inf}, nil, adaptive.ErrInvalidController},
		{"Gradient2 probe interval -Inf", &adaptive.Gradient2{ProbeInterval: -inf}, nil, adaptive.ErrInvalidController},
		{"a caller's controller that fails Validate", validating{errors.New("no")}, nil, adaptive.ErrInvalidController},
		{"Gradient2 probe interval 1e-9", &adaptive.Gradient2{ProbeInterval: 1e-9}, nil, adaptive.ErrInvalidController},
		{"Gradient2 probe interval 1", &adaptive.Gradient2{ProbeInterval: 1}, nil, adaptive.ErrInvalidController},
		{"Vegas probe multiplier 1", &adaptive.Vegas{ProbeMultiplier: 1}, nil, adaptive.ErrInvalidController},
		{"negative latency bound", nil, []adaptive.Option{adaptive.WithLatencyBound(-time.Second)}, adaptive.ErrInvalidLimits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim, err := adaptive.New(tt.ctrl, tt.opts...)
			require.ErrorIs(t, err, tt.want)
			require.Nil(t, lim)
			require.Contains(t, err.Error(), "adaptive: ")
			switch c := tt.ctrl.(type) {
			case *adaptive.AIMD, *adaptive.Vegas, *adaptive.Gradient2:
				require.ErrorIs(t, c.(interface{ Validate() error }).Validate(), tt.want, "Validate agrees with New")
			}
		})
	}
	for _, ctrl := range []adaptive.Controller{
		&adaptive.AIMD{}, &adaptive.AIMD{Backoff: 0.5, Timeout: time.Second},
		&adaptive.Vegas{}, &adaptive.Vegas{Alpha: 2, Beta: 2, Smoothing: 1, ProbeMultiplier: 2},
		&adaptive.Vegas{Alpha: 6}, &adaptive.Vegas{Beta: 9}, &adaptive.Vegas{Alpha: 50, Beta: 100},
		&adaptive.Gradient2{}, &adaptive.Gradient2{Tolerance: 1, Smoothing: 1, Headroom: 0, ProbeInterval: 2},
		validating{},
	} {
		lim, err := adaptive.New(ctrl)
		require.NoError(t, err, "%#v", ctrl)
		lim.Close()
	}
}

// TestNewRefusesVegasThresholdsTheBoundsDefeat checks the settings of
// Vegas that Validate cannot judge alone: Alpha above Beta at some limit
// within the bounds, where one of them takes its default, and a Beta the
// estimated queue, at most the limit, never exceeds.
func TestNewRefusesVegasThresholdsTheBoundsDefeat(t *testing.T) {
	tests := []struct {
		name              string
		v                 *adaptive.Vegas
		initial, min, max int64
		ok                bool
	}{
		{"Alpha 1000, Beta's default at most 18", &adaptive.Vegas{Alpha: 1000}, 20, 1, 1000, false},
		{"Alpha 30, Beta's default at most 18", &adaptive.Vegas{Alpha: 30}, 20, 1, 1000, false},
		{"Alpha 7, Beta's default 6 below a limit of 100", &adaptive.Vegas{Alpha: 7}, 20, 1, 1000, false},
		{"Alpha 7, limits from 100, Beta's default at least 12", &adaptive.Vegas{Alpha: 7}, 100, 100, 1000, true},
		{"Beta 8, Alpha's default 9 at a limit of 1000", &adaptive.Vegas{Beta: 8}, 20, 1, 1000, false},
		{"Beta 8, limits up to 999", &adaptive.Vegas{Beta: 8}, 20, 1, 999, true},
		{"Beta 1000 of at most 1000 in flight", &adaptive.Vegas{Alpha: 3, Beta: 1000}, 20, 1, 1000, false},
		{"Beta 999 of at most 1000", &adaptive.Vegas{Alpha: 3, Beta: 999}, 20, 1, 1000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.v.Validate(), "Validate alone, without the bounds, accepts it")
			lim, err := adaptive.New(tt.v, adaptive.WithLimits(tt.initial, tt.min, tt.max))
			if tt.ok {
				require.NoError(t, err)
				lim.Close()
				return
			}
			require.ErrorIs(t, err, adaptive.ErrInvalidController)
			require.Nil(t, lim)
			require.Contains(t, err.Error(), "adaptive: ")
		})
	}
}

var nan, inf = math.NaN(), math.Inf(1)

// validating is a caller's Controller with a Validate method.
type validating struct{ err error }

func (v validating) Next(limit float64, _ adaptive.Sample) float64 { return limit }
func (v validating) Validate() error                               { return v.err }

// TestNilArgumentsPanicWithThePrefix enumerates the entry points that a
// nil pointer or interface can reach, and checks that each panics at the
// call with a message that begins "adaptive: " and names the argument.
func TestNilArgumentsPanicWithThePrefix(t *testing.T) {
	lim := newLimiter(t, &recorder{}, 1, 10, 1)
	ok := http.NotFoundHandler()
	tests := []struct {
		name string
		call func()
		says string
	}{
		{"New with a nil *AIMD", func() { _, _ = adaptive.New((*adaptive.AIMD)(nil)) }, "ctrl"},
		{"New with a nil *Vegas", func() { _, _ = adaptive.New((*adaptive.Vegas)(nil)) }, "ctrl"},
		{"New with a nil *Gradient2", func() { _, _ = adaptive.New((*adaptive.Gradient2)(nil)) }, "ctrl"},
		{"New with a caller's nil controller", func() { _, _ = adaptive.New((*recorder)(nil)) }, "ctrl"},
		{"Acquire with a nil ctx", func() {
			//lint:ignore SA1012 the nil is the test
			_ = lim.Acquire(nil, new(adaptive.Permit))
		}, "ctx"},
		{"Acquire into a nil Permit", func() { _ = lim.Acquire(context.Background(), nil) }, "Permit"},
		{"TryAcquire into a nil Permit", func() { lim.TryAcquire(nil) }, "Permit"},
		{"Acquire on a nil Limiter", func() { _ = (*adaptive.Limiter)(nil).Acquire(context.Background(), new(adaptive.Permit)) }, "Limiter"},
		{"TryAcquire on a nil Limiter", func() { (*adaptive.Limiter)(nil).TryAcquire(new(adaptive.Permit)) }, "Limiter"},
		{"ending a nil Permit", func() { (*adaptive.Permit)(nil).Succeeded() }, "Permit"},
		{"Handler with a nil lim", func() { adaptive.Handler(nil, ok) }, "lim"},
		{"Handler with a nil next", func() { adaptive.Handler(lim, nil) }, "next"},
		{"WithRejection with a nil handler", func() { adaptive.WithRejection(nil) }, "reject"},
		{"WithClassifier with a nil function", func() { adaptive.WithClassifier(nil) }, "classify"},
		{"Transport without a Limiter", func() {
			_, _ = (&adaptive.Transport{}).RoundTrip(httptest.NewRequest("GET", "/", nil))
		}, "Limiter"},
		{"New with a nil Option", func() { _, _ = adaptive.New(nil, adaptive.WithLimits(1, 2, 1), nil) }, "Option"},
		{"WithSemaphoreOptions with a nil option", func() { adaptive.WithSemaphoreOptions(atomicsem.WithBarging(), nil) }, "atomicsem.Option"},
		{"Handler with a nil HandlerOption", func() { adaptive.Handler(lim, ok, adaptive.WithRejection(ok), nil) }, "HandlerOption"},
		{"Stats on a nil Limiter", func() { (*adaptive.Limiter)(nil).Stats() }, "Limiter"},
		{"Close on a nil Limiter", func() { (*adaptive.Limiter)(nil).Close() }, "Limiter"},
		{"Start of a nil Permit", func() { (*adaptive.Permit)(nil).Start() }, "Permit"},
		{"End of a nil Permit", func() { (*adaptive.Permit)(nil).End(adaptive.Dropped) }, "Permit"},
		{"Observe with a nil function", func() { _, _ = lim.Observe(nil) }, "nil f"},
		{"Observe on a nil Limiter", func() {
			_, _ = (*adaptive.Limiter)(nil).Observe(func(adaptive.Outcome, time.Duration) {})
		}, "Limiter"},
		{"RoundTrip on a nil Transport", func() {
			_, _ = (*adaptive.Transport)(nil).RoundTrip(httptest.NewRequest("GET", "/", nil))
		}, "Transport"},
		{"RoundTrip of a nil Request", func() {
			_, _ = (&adaptive.Transport{Limiter: lim, Base: respond(http.StatusOK)}).RoundTrip(nil)
		}, "Request"},
		{"RoundTrip of a nil Request, waiting", func() {
			_, _ = (&adaptive.Transport{Limiter: lim, Base: respond(http.StatusOK), Wait: true}).RoundTrip(nil)
		}, "Request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r, "no panic")
				msg := fmt.Sprint(r)
				require.Regexp(t, "^adaptive: ", msg)
				require.Contains(t, msg, tt.says)
			}()
			tt.call()
		})
	}
	st := lim.Stats()
	require.Equal(t, int64(0), st.InFlight, "the panics changed nothing")
	require.Equal(t, int64(1), st.Limit)
}

func TestNewStartsAtTheInitialLimit(t *testing.T) {
	lim, err := adaptive.New(nil)
	require.NoError(t, err)
	defer lim.Close()
	require.Equal(t, int64(adaptive.DefaultInitialLimit), lim.Stats().Limit)

	lim2 := newLimiter(t, &fixed{limit: 3}, 2, 8, 5)
	require.Equal(t, int64(5), lim2.Stats().Limit)
}

func TestTryAcquireShedsAtTheLimit(t *testing.T) {
	lim := newLimiter(t, &fixed{limit: 2}, 1, 10, 2)
	var a, b, c adaptive.Permit
	require.True(t, lim.TryAcquire(&a))
	require.True(t, lim.TryAcquire(&b))
	require.False(t, lim.TryAcquire(&c), "a third request under a limit of 2")
	require.Equal(t, time.Time{}, c.Start(), "a failed acquire leaves the permit zero")

	st := lim.Stats()
	require.Equal(t, int64(2), st.InFlight)
	require.Equal(t, uint64(1), st.Rejected)

	a.Ignored()
	require.True(t, lim.TryAcquire(&c), "the ignored request's slot is free again")
	b.Ignored()
	c.Ignored()
	require.Equal(t, int64(0), lim.Stats().InFlight)
}

func TestOutcomesReachTheController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		lim := newLimiter(t, rec, 1, 10, 4)
		var p, q, r adaptive.Permit
		require.True(t, lim.TryAcquire(&p))
		start := time.Now()
		require.True(t, lim.TryAcquire(&q))
		require.True(t, lim.TryAcquire(&r))
		time.Sleep(30 * time.Millisecond)
		p.Succeeded()
		q.Dropped()
		r.Ignored()

		require.Len(t, rec.samples, 2, "Ignore gives the controller no sample")
		require.Equal(t, adaptive.Sample{Start: start, RTT: 30 * time.Millisecond, InFlight: 1}, rec.samples[0])
		require.Equal(t, adaptive.Sample{Start: start, RTT: 30 * time.Millisecond, InFlight: 2, Dropped: true}, rec.samples[1])
		require.Equal(t, start.Add(30*time.Millisecond), rec.samples[0].End())

		st := lim.Stats()
		require.Equal(t, adaptive.Stats{Limit: 4, LastRTT: 30 * time.Millisecond, Succeeded: 1, Dropped: 1, Ignored: 1}, st)
	})
}

func TestEndTakesTheNamedOutcome(t *testing.T) {
	lim := newLimiter(t, &recorder{}, 1, 10, 4)
	for _, o := range []adaptive.Outcome{adaptive.Succeeded, adaptive.Dropped, adaptive.Ignored, adaptive.Outcome(9)} {
		var p adaptive.Permit
		require.True(t, lim.TryAcquire(&p))
		p.End(o)
	}
	st := lim.Stats()
	require.Equal(t, [3]uint64{1, 1, 2}, [3]uint64{st.Succeeded, st.Dropped, st.Ignored})
}

func TestControllerMovesTheSemaphoreLimitWithinBounds(t *testing.T) {
	tests := []struct {
		name string
		next float64
		want int64
	}{
		{"raise", 7.9, 7},
		{"lower", 2, 2},
		{"above max", 50, 10},
		{"below min", 0.2, 2},
		{"not a number", nan, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctrl := &fixed{limit: tt.next}
			lim := newLimiter(t, ctrl, 2, 10, 4)
			var p adaptive.Permit
			require.True(t, lim.TryAcquire(&p))
			p.Succeeded()
			require.Equal(t, tt.want, lim.Stats().Limit)
		})
	}
}

func TestLoweringTheLimitRevokesNothing(t *testing.T) {
	ctrl := &fixed{limit: 1}
	lim := newLimiter(t, ctrl, 1, 10, 4)
	var ps [4]adaptive.Permit
	for i := range ps {
		require.True(t, lim.TryAcquire(&ps[i]))
	}
	ps[0].Succeeded() // the controller lowers the limit to 1
	st := lim.Stats()
	require.Equal(t, int64(1), st.Limit)
	require.Equal(t, int64(3), st.InFlight, "the requests in flight keep their permits")

	var p adaptive.Permit
	require.False(t, lim.TryAcquire(&p), "nothing is admitted while more than the limit are out")
	ps[1].Succeeded()
	ps[2].Succeeded()
	require.False(t, lim.TryAcquire(&p), "one still out fills a limit of 1")
	ps[3].Succeeded()
	require.True(t, lim.TryAcquire(&p))
	p.Ignored()
}

func TestAcquireWaitsForAFreeSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newLimiter(t, &fixed{limit: 1}, 1, 10, 1)
		var held adaptive.Permit
		require.NoError(t, lim.Acquire(context.Background(), &held))

		done := make(chan error)
		var p adaptive.Permit
		go func() { done <- lim.Acquire(context.Background(), &p) }()
		synctest.Wait()
		require.Equal(t, 1, lim.Stats().Waiters)

		held.Succeeded()
		require.NoError(t, <-done)
		require.Equal(t, time.Now(), p.Start())
		p.Succeeded()
	})
}

func TestAcquireReturnsTheContextError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newLimiter(t, &fixed{limit: 1}, 1, 10, 1)
		var held, p adaptive.Permit
		require.True(t, lim.TryAcquire(&held))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := lim.Acquire(ctx, &p)
		require.Equal(t, context.DeadlineExceeded, err, "ctx.Err(), unwrapped")
		require.Equal(t, time.Time{}, p.Start())
		require.Equal(t, int64(1), lim.Stats().InFlight)
		held.Ignored()
	})
}

func TestCloseFailsWaitersAndLaterAcquires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newLimiter(t, &fixed{limit: 1}, 1, 10, 1)
		var held adaptive.Permit
		require.True(t, lim.TryAcquire(&held))
		done := make(chan error)
		go func() {
			var p adaptive.Permit
			done <- lim.Acquire(context.Background(), &p)
		}()
		synctest.Wait()
		lim.Close()
		require.ErrorIs(t, <-done, atomicsem.ErrClosed)

		var p adaptive.Permit
		require.False(t, lim.TryAcquire(&p))
		require.ErrorIs(t, lim.Acquire(context.Background(), &p), atomicsem.ErrClosed)
		held.Succeeded() // a permit out before Close may still end
		st := lim.Stats()
		require.True(t, st.Closed)
		require.Equal(t, int64(0), st.InFlight)
		lim.Close() // closing twice does nothing
	})
}

func TestPermitMisusePanicsAndChangesNothing(t *testing.T) {
	lim := newLimiter(t, &recorder{}, 1, 10, 2)
	var zero adaptive.Permit
	for _, end := range []func(){zero.Succeeded, zero.Dropped, zero.Ignored} {
		requirePanicPrefix(t, end)
	}

	var p adaptive.Permit
	require.True(t, lim.TryAcquire(&p))
	requirePanicPrefix(t, func() { lim.TryAcquire(&p) })
	requirePanicPrefix(t, func() { _ = lim.Acquire(context.Background(), &p) })
	require.Equal(t, int64(1), lim.Stats().InFlight, "acquiring into a live permit takes nothing")

	p.Succeeded()
	requirePanicPrefix(t, p.Succeeded)
	requirePanicPrefix(t, p.Dropped)
	st := lim.Stats()
	require.Equal(t, uint64(1), st.Succeeded)
	require.Equal(t, uint64(0), st.Dropped)
	require.Equal(t, int64(0), st.InFlight)

	require.True(t, lim.TryAcquire(&p), "an ended permit can be filled in again")
	p.Ignored()
}

func requirePanicPrefix(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		require.NotNil(t, r, "no panic")
		err, ok := r.(error)
		require.True(t, ok, "panic value %v is not an error", r)
		require.Regexp(t, "^adaptive: ", err.Error())
		require.False(t, errors.Is(err, context.Canceled))
	}()
	f()
}
