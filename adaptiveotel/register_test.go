package adaptiveotel_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptiveotel"
)

// TestRegisterReportsTheLimiter follows one limiter through admissions,
// outcomes, controller moves of its limit, a shed request and a waiter,
// checking every instrument after each step.
func TestRegisterReportsTheLimiter(t *testing.T) {
	lim, ctrl := newLimiter(t, 10)
	provider, reader := newMeter(t)
	_, err := adaptiveotel.Register(provider.Meter("test"), lim, adaptiveotel.WithName("api"))
	require.NoError(t, err)

	want := map[string]float64{
		"atomicsem.adaptive.limit{limiter.name=api}":                      10,
		"atomicsem.adaptive.in_flight{limiter.name=api}":                  0,
		"atomicsem.adaptive.waiting{limiter.name=api}":                    0,
		"atomicsem.adaptive.requests{limiter.name=api,outcome=succeeded}": 0,
		"atomicsem.adaptive.requests{limiter.name=api,outcome=dropped}":   0,
		"atomicsem.adaptive.requests{limiter.name=api,outcome=ignored}":   0,
		"atomicsem.adaptive.requests{limiter.name=api,outcome=rejected}":  0,
	}
	require.Equal(t, want, collect(t, reader), "no duration before the first request ends")

	var a, b, c adaptive.Permit
	require.True(t, lim.TryAcquire(&a))
	require.True(t, lim.TryAcquire(&b))
	require.True(t, lim.TryAcquire(&c))
	want["atomicsem.adaptive.in_flight{limiter.name=api}"] = 3
	require.Equal(t, want, collect(t, reader))

	time.Sleep(time.Millisecond) // so that the round trip is not 0 on a coarse clock
	ctrl.to.Store(4)
	a.End(adaptive.Succeeded)
	rtt := lim.Stats().LastRTT
	require.Positive(t, rtt)
	want["atomicsem.adaptive.limit{limiter.name=api}"] = 4
	want["atomicsem.adaptive.in_flight{limiter.name=api}"] = 2
	want["atomicsem.adaptive.requests{limiter.name=api,outcome=succeeded}"] = 1
	want["atomicsem.adaptive.request.duration{limiter.name=api,outcome=succeeded} count"] = 1
	want["atomicsem.adaptive.request.duration{limiter.name=api,outcome=succeeded} sum"] = rtt.Seconds()
	require.Equal(t, want, collect(t, reader))

	ctrl.to.Store(2)
	b.End(adaptive.Dropped)
	c.End(adaptive.Ignored) // no sample: the limit stays
	want["atomicsem.adaptive.limit{limiter.name=api}"] = 2
	want["atomicsem.adaptive.in_flight{limiter.name=api}"] = 0
	want["atomicsem.adaptive.requests{limiter.name=api,outcome=dropped}"] = 1
	want["atomicsem.adaptive.requests{limiter.name=api,outcome=ignored}"] = 1
	want["atomicsem.adaptive.request.duration{limiter.name=api,outcome=dropped} count"] = 1
	want["atomicsem.adaptive.request.duration{limiter.name=api,outcome=ignored} count"] = 1
	got := collect(t, reader)
	for _, o := range []string{"dropped", "ignored"} { // their sums are whatever the clock read
		sum := "atomicsem.adaptive.request.duration{limiter.name=api,outcome=" + o + "} sum"
		require.GreaterOrEqual(t, got[sum], rtt.Seconds(), sum)
		want[sum] = got[sum]
	}
	require.Equal(t, want, got)

	// Fill the limit: one more TryAcquire is shed, one Acquire waits.
	require.True(t, lim.TryAcquire(&a))
	require.True(t, lim.TryAcquire(&b))
	require.False(t, lim.TryAcquire(&c))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // a failed check must not leave the waiter parked
	waited := make(chan error, 1)
	go func() { waited <- lim.Acquire(ctx, &c) }()
	require.Eventually(t, func() bool { return lim.Stats().Waiters == 1 }, 10*time.Second, time.Millisecond)
	want["atomicsem.adaptive.in_flight{limiter.name=api}"] = 2
	want["atomicsem.adaptive.waiting{limiter.name=api}"] = 1
	want["atomicsem.adaptive.requests{limiter.name=api,outcome=rejected}"] = 1
	require.Equal(t, want, collect(t, reader))

	cancel()
	require.ErrorIs(t, <-waited, context.Canceled)
	want["atomicsem.adaptive.waiting{limiter.name=api}"] = 0
	require.Equal(t, want, collect(t, reader))
	a.End(adaptive.Ignored)
	b.End(adaptive.Ignored)
}

// TestRealControllerMovesTheReportedLimit: with AIMD, a window of drops
// lowers the reported limit.
func TestRealControllerMovesTheReportedLimit(t *testing.T) {
	lim, err := adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(20, 1, 100))
	require.NoError(t, err)
	defer lim.Close()
	provider, reader := newMeter(t)
	_, err = adaptiveotel.Register(provider.Meter("test"), lim)
	require.NoError(t, err)
	require.EqualValues(t, 20, collect(t, reader)["atomicsem.adaptive.limit{}"])
	for range 40 {
		var p adaptive.Permit
		require.True(t, lim.TryAcquire(&p))
		p.End(adaptive.Dropped)
	}
	got := collect(t, reader)
	require.Less(t, got["atomicsem.adaptive.limit{}"], 20.0)
	require.Equal(t, float64(lim.Stats().Limit), got["atomicsem.adaptive.limit{}"])
	require.EqualValues(t, 40, got["atomicsem.adaptive.requests{outcome=dropped}"])
}

func TestAttributesAndSeveralLimiters(t *testing.T) {
	api, _ := newLimiter(t, 10)
	db, _ := newLimiter(t, 3)
	provider, reader := newMeter(t)
	meter := provider.Meter("test")
	_, err := adaptiveotel.Register(meter, api, adaptiveotel.WithName("api"), adaptiveotel.WithAttributes(attribute.String("region", "eu")))
	require.NoError(t, err)
	_, err = adaptiveotel.Register(meter, db, adaptiveotel.WithName("db"))
	require.NoError(t, err)
	var p adaptive.Permit
	require.True(t, db.TryAcquire(&p))
	defer p.End(adaptive.Ignored)

	got := collect(t, reader)
	require.Len(t, got, 14, dump(got)) // no request has ended: no durations
	require.EqualValues(t, 10, got["atomicsem.adaptive.limit{limiter.name=api,region=eu}"])
	require.EqualValues(t, 0, got["atomicsem.adaptive.in_flight{limiter.name=api,region=eu}"])
	require.Contains(t, got, "atomicsem.adaptive.requests{limiter.name=api,outcome=rejected,region=eu}")
	require.EqualValues(t, 3, got["atomicsem.adaptive.limit{limiter.name=db}"])
	require.EqualValues(t, 1, got["atomicsem.adaptive.in_flight{limiter.name=db}"])
}

// TestUnregisterStopsReporting: after Unregister, a collection has no
// points from the limiter, whatever it does; registering again reports it.
func TestUnregisterStopsReporting(t *testing.T) {
	lim, ctrl := newLimiter(t, 10)
	provider, reader := newMeter(t)
	reg, err := adaptiveotel.Register(provider.Meter("test"), lim, adaptiveotel.WithName("api"))
	require.NoError(t, err)
	require.NotEmpty(t, collect(t, reader))

	require.NoError(t, reg.Unregister())
	ctrl.to.Store(5)
	var p adaptive.Permit
	require.True(t, lim.TryAcquire(&p))
	p.End(adaptive.Dropped)
	require.Empty(t, collect(t, reader))

	reg, err = adaptiveotel.Register(provider.Meter("test"), lim, adaptiveotel.WithName("api"))
	require.NoError(t, err)
	defer reg.Unregister()
	got := collect(t, reader)
	require.EqualValues(t, 5, got["atomicsem.adaptive.limit{limiter.name=api}"])
	require.EqualValues(t, 1, got["atomicsem.adaptive.requests{limiter.name=api,outcome=dropped}"])
}

// TestRegisterStartsNoGoroutine checks while the registration is live,
// not only at the end of the run.
func TestRegisterStartsNoGoroutine(t *testing.T) {
	lim, _ := newLimiter(t, 10)
	provider, reader := newMeter(t)
	reg, err := adaptiveotel.Register(provider.Meter("test"), lim)
	require.NoError(t, err)
	defer reg.Unregister()
	collect(t, reader)
	goleak.VerifyNone(t)
}

// failingMeter fails to create the instrument named fail, or to register
// a callback when fail is "callback".
type failingMeter struct {
	noop.Meter
	fail string
}

var errMeter = errors.New("meter says no")

func (m failingMeter) Int64ObservableUpDownCounter(name string, opts ...metric.Int64ObservableUpDownCounterOption) (metric.Int64ObservableUpDownCounter, error) {
	if name == m.fail {
		return nil, errMeter
	}
	return m.Meter.Int64ObservableUpDownCounter(name, opts...)
}

func (m failingMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	if name == m.fail {
		return nil, errMeter
	}
	return m.Meter.Float64Histogram(name, opts...)
}

func (m failingMeter) Int64ObservableCounter(name string, opts ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	if name == m.fail {
		return nil, errMeter
	}
	return m.Meter.Int64ObservableCounter(name, opts...)
}

func (m failingMeter) RegisterCallback(f metric.Callback, instruments ...metric.Observable) (metric.Registration, error) {
	if m.fail == "callback" {
		return nil, errMeter
	}
	return m.Meter.RegisterCallback(f, instruments...)
}

// TestRegisterReturnsTheMetersError makes the meter fail at each step of
// Register: each returns the meter's error, and registers nothing, so
// that a Register that succeeds afterwards is the limiter's only one.
func TestRegisterReturnsTheMetersError(t *testing.T) {
	lim, _ := newLimiter(t, 10)
	for _, fail := range []string{adaptiveotel.LimitName, adaptiveotel.WaitingName, adaptiveotel.DurationName,
		adaptiveotel.RequestsName, "callback"} {
		reg, err := adaptiveotel.Register(failingMeter{fail: fail}, lim)
		require.ErrorIs(t, err, errMeter, fail)
		require.Contains(t, err.Error(), "adaptiveotel: ")
		require.Contains(t, err.Error(), fail)
		require.Nil(t, reg)
	}
	reg, err := adaptiveotel.Register(noop.Meter{}, lim)
	require.NoError(t, err, "a failed Register left the limiter registered")
	require.NoError(t, reg.Unregister())
}

func TestNilArgumentsPanic(t *testing.T) {
	lim, _ := newLimiter(t, 10)
	require.PanicsWithValue(t, "adaptiveotel: nil Meter", func() { _, _ = adaptiveotel.Register(nil, lim) })
	require.PanicsWithValue(t, "adaptiveotel: nil Limiter", func() { _, _ = adaptiveotel.Register(noop.Meter{}, nil) })
	require.PanicsWithValue(t, "adaptiveotel: nil Option", func() {
		_, _ = adaptiveotel.Register(noop.Meter{}, lim, adaptiveotel.WithName("api"), nil)
	})
}

// TestRegisteringTwiceIsRefused registers a limiter a second time while
// the first registration is live, on the same meter and on another
// provider's: both are refused, so that no request is counted twice, and
// the first keeps reporting. Once it is unregistered, the limiter can be
// registered again.
func TestRegisteringTwiceIsRefused(t *testing.T) {
	lim, _ := newLimiter(t, 10)
	provider, reader := newMeter(t)
	other, _ := newMeter(t)
	reg, err := adaptiveotel.Register(provider.Meter("test"), lim, adaptiveotel.WithName("api"))
	require.NoError(t, err)
	for _, meter := range []metric.Meter{provider.Meter("test"), other.Meter("test")} {
		again, err := adaptiveotel.Register(meter, lim, adaptiveotel.WithName("api"))
		require.ErrorIs(t, err, adaptive.ErrObserved)
		require.Regexp(t, "^adaptiveotel: ", err.Error())
		require.Nil(t, again)
	}

	var p adaptive.Permit
	require.True(t, lim.TryAcquire(&p))
	p.Succeeded()
	got := collect(t, reader)
	require.EqualValues(t, 1, got["atomicsem.adaptive.requests{limiter.name=api,outcome=succeeded}"], dump(got))
	require.EqualValues(t, 1, got["atomicsem.adaptive.request.duration{limiter.name=api,outcome=succeeded} count"], dump(got))

	require.NoError(t, reg.Unregister())
	require.NoError(t, reg.Unregister(), "a second Unregister does nothing")
	reg, err = adaptiveotel.Register(other.Meter("test"), lim)
	require.NoError(t, err)
	require.NoError(t, reg.Unregister())
}

// TestDurationsAreAHistogram ends requests of known durations in fake
// time: each lands in the histogram with its outcome, in the bucket of its
// duration, and the sum is exact.
func TestDurationsAreAHistogram(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, _ := newLimiter(t, 10)
		provider, reader := newMeter(t)
		reg, err := adaptiveotel.Register(provider.Meter("test"), lim)
		require.NoError(t, err)
		defer reg.Unregister()
		for _, r := range []struct {
			d time.Duration
			o adaptive.Outcome
		}{
			{3 * time.Millisecond, adaptive.Succeeded},
			{7 * time.Millisecond, adaptive.Succeeded},
			{40 * time.Millisecond, adaptive.Succeeded},
			{300 * time.Millisecond, adaptive.Dropped},
			{20 * time.Second, adaptive.Ignored},
		} {
			var p adaptive.Permit
			require.True(t, lim.TryAcquire(&p))
			time.Sleep(r.d)
			p.End(r.o)
		}

		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		type bucketed struct {
			count  uint64
			sum    float64
			counts []uint64
		}
		got := map[string]bucketed{}
		for _, m := range rm.ScopeMetrics[0].Metrics {
			if m.Name != adaptiveotel.DurationName {
				continue
			}
			require.Equal(t, "s", m.Unit)
			h := m.Data.(metricdata.Histogram[float64])
			for _, p := range h.DataPoints {
				require.Equal(t, []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}, p.Bounds)
				o, _ := p.Attributes.Value(adaptiveotel.OutcomeKey)
				got[o.AsString()] = bucketed{p.Count, p.Sum, p.BucketCounts}
			}
		}
		//                     ≤5ms ≤10 ≤25 ≤50 ≤75 ≤100 ≤250 ≤500 ≤750 ≤1s ≤2.5 ≤5 ≤7.5 ≤10 >10s
		require.Equal(t, map[string]bucketed{
			"succeeded": {3, 0.05, []uint64{1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
			"dropped":   {1, 0.3, []uint64{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}},
			"ignored":   {1, 20, []uint64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
		}, got)
	})
}

// TestNamesFollowTheSemanticConventions reads the raw instruments: their
// names and attribute keys are lowercase, dot-namespaced under
// atomicsem.adaptive, and their units and kinds are those of the package
// doc.
func TestNamesFollowTheSemanticConventions(t *testing.T) {
	lim, _ := newLimiter(t, 10)
	provider, reader := newMeter(t)
	reg, err := adaptiveotel.Register(provider.Meter("test"), lim, adaptiveotel.WithName("api"))
	require.NoError(t, err)
	defer reg.Unregister()
	var p adaptive.Permit
	require.True(t, lim.TryAcquire(&p))
	p.Succeeded()

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	kinds := map[string]string{}
	name := regexp.MustCompile(`^atomicsem\.adaptive\.[a-z_]+(\.[a-z_]+)*$`)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		require.Regexp(t, name, m.Name)
		var attrs []attribute.Set
		switch data := m.Data.(type) {
		case metricdata.Sum[int64]:
			kinds[m.Name] = map[bool]string{true: "counter", false: "updown"}[data.IsMonotonic] + " " + m.Unit
			for _, p := range data.DataPoints {
				attrs = append(attrs, p.Attributes)
			}
		case metricdata.Histogram[float64]:
			kinds[m.Name] = "histogram " + m.Unit
			for _, p := range data.DataPoints {
				attrs = append(attrs, p.Attributes)
			}
		default:
			t.Fatalf("%s: %T", m.Name, m.Data)
		}
		for _, set := range attrs {
			for _, kv := range set.ToSlice() {
				require.Regexp(t, name, string(kv.Key), m.Name)
			}
		}
	}
	require.Equal(t, map[string]string{
		"atomicsem.adaptive.limit":            "updown {request}",
		"atomicsem.adaptive.in_flight":        "updown {request}",
		"atomicsem.adaptive.waiting":          "updown {request}",
		"atomicsem.adaptive.request.duration": "histogram s",
		"atomicsem.adaptive.requests":         "counter {request}",
	}, kinds)
}
