package adaptiveotel

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/atomicsem/atomicsem/adaptive"
)

// The instruments' names.
const (
	LimitName    = "atomicsem.adaptive.limit"
	InFlightName = "atomicsem.adaptive.in_flight"
	WaitingName  = "atomicsem.adaptive.waiting"
	LastRTTName  = "atomicsem.adaptive.last_rtt"
	RequestsName = "atomicsem.adaptive.requests"
)

// The attributes' keys.
const (
	// LimiterKey is the attribute that carries the name given with WithName.
	LimiterKey = attribute.Key("limiter")
	// OutcomeKey is the attribute of the requests counter that says how
	// the requests ended: "succeeded", "dropped", "ignored" or "rejected".
	OutcomeKey = attribute.Key("outcome")
)

// An Option configures Register.
type Option func(*config)

type config struct {
	attrs []attribute.KeyValue
}

// WithName names the limiter: every measurement carries the attribute
// limiter=name, so that one meter can report several limiters.
func WithName(name string) Option {
	return func(c *config) { c.attrs = append(c.attrs, LimiterKey.String(name)) }
}

// WithAttributes adds attrs to every measurement.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, attrs...) }
}

// Register creates the instruments of the package doc on meter and
// registers one callback that reports lim's Stats through them at each
// collection, until the returned Registration's Unregister is called. It
// starts no goroutine.
//
// Register returns the meter's error, with the name of the instrument it
// failed on, if the meter cannot create an instrument or register the
// callback; it then registers nothing. It is a run-time error to pass a
// nil meter or lim.
func Register(meter metric.Meter, lim *adaptive.Limiter, opts ...Option) (metric.Registration, error) {
	if meter == nil {
		panic("adaptiveotel: nil Meter")
	}
	if lim == nil {
		panic("adaptiveotel: nil Limiter")
	}
	var c config
	for _, opt := range opts {
		opt(&c)
	}
	r := &reporter{lim: lim}
	if err := r.create(meter, c.attrs); err != nil {
		return nil, err
	}
	reg, err := meter.RegisterCallback(r.observe, r.limit, r.inFlight, r.waiting, r.lastRTT, r.requests)
	if err != nil {
		return nil, fmt.Errorf("adaptiveotel: registering the callback: %w", err)
	}
	return reg, nil
}

// reporter holds the instruments and the attribute sets of one limiter,
// built once so that a collection does not rebuild them.
type reporter struct {
	lim      *adaptive.Limiter
	limit    metric.Int64ObservableGauge
	inFlight metric.Int64ObservableGauge
	waiting  metric.Int64ObservableGauge
	lastRTT  metric.Float64ObservableGauge
	requests metric.Int64ObservableCounter

	attrs                                 metric.MeasurementOption
	succeeded, dropped, ignored, rejected metric.MeasurementOption
}

func (r *reporter) create(meter metric.Meter, attrs []attribute.KeyValue) error {
	var err error
	wrap := func(name string, err error) error {
		return fmt.Errorf("adaptiveotel: creating %s: %w", name, err)
	}
	if r.limit, err = meter.Int64ObservableGauge(LimitName, metric.WithUnit("{request}"),
		metric.WithDescription("The concurrency limit in force.")); err != nil {
		return wrap(LimitName, err)
	}
	if r.inFlight, err = meter.Int64ObservableGauge(InFlightName, metric.WithUnit("{request}"),
		metric.WithDescription("Requests admitted and not yet ended.")); err != nil {
		return wrap(InFlightName, err)
	}
	if r.waiting, err = meter.Int64ObservableGauge(WaitingName, metric.WithUnit("{request}"),
		metric.WithDescription("Requests waiting for a slot.")); err != nil {
		return wrap(WaitingName, err)
	}
	if r.lastRTT, err = meter.Float64ObservableGauge(LastRTTName, metric.WithUnit("s"),
		metric.WithDescription("Round-trip time of the last request that succeeded.")); err != nil {
		return wrap(LastRTTName, err)
	}
	if r.requests, err = meter.Int64ObservableCounter(RequestsName, metric.WithUnit("{request}"),
		metric.WithDescription("Requests by how they ended: succeeded, dropped, ignored, or rejected (shed).")); err != nil {
		return wrap(RequestsName, err)
	}
	with := func(outcome string) metric.MeasurementOption {
		kv := append(append([]attribute.KeyValue(nil), attrs...), OutcomeKey.String(outcome))
		return metric.WithAttributeSet(attribute.NewSet(kv...))
	}
	r.attrs = metric.WithAttributeSet(attribute.NewSet(attrs...))
	r.succeeded, r.dropped, r.ignored, r.rejected = with("succeeded"), with("dropped"), with("ignored"), with("rejected")
	return nil
}

// observe reports one snapshot of the limiter.
func (r *reporter) observe(_ context.Context, o metric.Observer) error {
	st := r.lim.Stats()
	o.ObserveInt64(r.limit, st.Limit, r.attrs)
	o.ObserveInt64(r.inFlight, st.InFlight, r.attrs)
	o.ObserveInt64(r.waiting, int64(st.Waiters), r.attrs)
	if st.LastRTT > 0 {
		o.ObserveFloat64(r.lastRTT, st.LastRTT.Seconds(), r.attrs)
	}
	o.ObserveInt64(r.requests, int64(st.Succeeded), r.succeeded)
	o.ObserveInt64(r.requests, int64(st.Dropped), r.dropped)
	o.ObserveInt64(r.requests, int64(st.Ignored), r.ignored)
	o.ObserveInt64(r.requests, int64(st.Rejected), r.rejected)
	return nil
}
