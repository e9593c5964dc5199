package adaptiveotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
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
		"atomicsem.adaptive.limit{limiter=api}":                      10,
		"atomicsem.adaptive.in_flight{limiter=api}":                  0,
		"atomicsem.adaptive.waiting{limiter=api}":                    0,
		"atomicsem.adaptive.requests{limiter=api,outcome=succeeded}": 0,
		"atomicsem.adaptive.requests{limiter=api,outcome=dropped}":   0,
		"atomicsem.adaptive.requests{limiter=api,outcome=ignored}":   0,
		"atomicsem.adaptive.requests{limiter=api,outcome=rejected}":  0,
	}
	require.Equal(t, want, collect(t, reader), "no last_rtt before the first success")

	var a, b, c adaptive.Permit
	require.True(t, lim.TryAcquire(&a))
	require.True(t, lim.TryAcquire(&b))
	require.True(t, lim.TryAcquire(&c))
	want["atomicsem.adaptive.in_flight{limiter=api}"] = 3
	require.Equal(t, want, collect(t, reader))

	time.Sleep(time.Millisecond) // so that the round trip is not 0 on a coarse clock
	ctrl.to.Store(4)
	a.End(adaptive.Succeeded)
	rtt := lim.Stats().LastRTT
	require.Positive(t, rtt)
	want["atomicsem.adaptive.limit{limiter=api}"] = 4
	want["atomicsem.adaptive.in_flight{limiter=api}"] = 2
	want["atomicsem.adaptive.requests{limiter=api,outcome=succeeded}"] = 1
	want["atomicsem.adaptive.last_rtt{limiter=api}"] = rtt.Seconds()
	require.Equal(t, want, collect(t, reader))

	ctrl.to.Store(2)
	b.End(adaptive.Dropped)
	c.End(adaptive.Ignored) // no sample: the limit stays
	want["atomicsem.adaptive.limit{limiter=api}"] = 2
	want["atomicsem.adaptive.in_flight{limiter=api}"] = 0
	want["atomicsem.adaptive.requests{limiter=api,outcome=dropped}"] = 1
	want["atomicsem.adaptive.requests{limiter=api,outcome=ignored}"] = 1
	require.Equal(t, want, collect(t, reader))

	// Fill the limit: one more TryAcquire is shed, one Acquire waits.
	require.True(t, lim.TryAcquire(&a))
	require.True(t, lim.TryAcquire(&b))
	require.False(t, lim.TryAcquire(&c))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // a failed check must not leave the waiter parked
	waited := make(chan error, 1)
	go func() { waited <- lim.Acquire(ctx, &c) }()
	require.Eventually(t, func() bool { return lim.Stats().Waiters == 1 }, 10*time.Second, time.Millisecond)
	want["atomicsem.adaptive.in_flight{limiter=api}"] = 2
	want["atomicsem.adaptive.waiting{limiter=api}"] = 1
	want["atomicsem.adaptive.requests{limiter=api,outcome=rejected}"] = 1
	require.Equal(t, want, collect(t, reader))

	cancel()
	require.ErrorIs(t, <-waited, context.Canceled)
	want["atomicsem.adaptive.waiting{limiter=api}"] = 0
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
	require.Len(t, got, 14, dump(got))
	require.EqualValues(t, 10, got["atomicsem.adaptive.limit{limiter=api,region=eu}"])
	require.EqualValues(t, 0, got["atomicsem.adaptive.in_flight{limiter=api,region=eu}"])
	require.Contains(t, got, "atomicsem.adaptive.requests{limiter=api,outcome=rejected,region=eu}")
	require.EqualValues(t, 3, got["atomicsem.adaptive.limit{limiter=db}"])
	require.EqualValues(t, 1, got["atomicsem.adaptive.in_flight{limiter=db}"])
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
	require.EqualValues(t, 5, got["atomicsem.adaptive.limit{limiter=api}"])
	require.EqualValues(t, 1, got["atomicsem.adaptive.requests{limiter=api,outcome=dropped}"])
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

func (m failingMeter) Int64ObservableGauge(name string, opts ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	if name == m.fail {
		return nil, errMeter
	}
	return m.Meter.Int64ObservableGauge(name, opts...)
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

func TestRegisterReturnsTheMetersError(t *testing.T) {
	lim, _ := newLimiter(t, 10)
	for _, fail := range []string{adaptiveotel.LimitName, adaptiveotel.WaitingName, adaptiveotel.RequestsName, "callback"} {
		reg, err := adaptiveotel.Register(failingMeter{fail: fail}, lim)
		require.ErrorIs(t, err, errMeter, fail)
		require.Contains(t, err.Error(), "adaptiveotel: ")
		require.Contains(t, err.Error(), fail)
		require.Nil(t, reg)
	}
}

func TestNilArgumentsPanic(t *testing.T) {
	lim, _ := newLimiter(t, 10)
	require.PanicsWithValue(t, "adaptiveotel: nil Meter", func() { _, _ = adaptiveotel.Register(nil, lim) })
	require.PanicsWithValue(t, "adaptiveotel: nil Limiter", func() { _, _ = adaptiveotel.Register(noop.Meter{}, nil) })
}
