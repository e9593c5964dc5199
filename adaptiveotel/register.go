package adaptiveotel

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"

	"github.com/atomicsem/atomicsem/adaptive"
)

// The instruments' names, in the atomicsem.adaptive namespace.
const (
	LimitName    = "atomicsem.adaptive.limit"
	InFlightName = "atomicsem.adaptive.in_flight"
	WaitingName  = "atomicsem.adaptive.waiting"
	DurationName = "atomicsem.adaptive.request.duration"
	RequestsName = "atomicsem.adaptive.requests"
)

// The attributes' keys, in the instruments' namespace, as the semantic
// conventions ask of attributes that only these instruments use.
const (
	// LimiterKey is the attribute that carries the name given with WithName.
	LimiterKey = attribute.Key("atomicsem.adaptive.limiter.name")
	// OutcomeKey is the attribute of the requests counter and the
	// duration histogram that says how the requests ended: "succeeded",
	// "dropped", "ignored", or for the counter "rejected".
	OutcomeKey = attribute.Key("atomicsem.adaptive.outcome")
)

// durationBuckets are the duration histogram's bucket boundaries, in
// seconds: those the semantic conventions advise for HTTP request
// durations. A View given to the meter provider replaces them.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// An Option configures Register.
type Option func(*config)

type config struct {
	attrs []attribute.KeyValue
}

// WithName names the limiter: every measurement carries the attribute
// atomicsem.adaptive.limiter.name=name, so that one meter can report
// several limiters.
func WithName(name string) Option {
	return func(c *config) { c.attrs = append(c.attrs, LimiterKey.String(name)) }
}

// WithAttributes adds attrs to every measurement.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, attrs...) }
}

// Register creates the instruments of the package doc on meter, registers
// one callback that reports lim's Stats through them at each collection,
// and becomes lim's observer (adaptive.Limiter.Observe) to record each
// request's duration, until the returned Registration's Unregister is
// called. It starts no goroutine.
//
// A limiter is registered once at a time, so that no request is counted
// twice: while it is registered (or has another observer), Register
// returns an error that errors.Is reports as adaptive.ErrObserved. It
// returns the meter's error, with the name of the instrument it failed on,
// if the meter cannot create an instrument or register the callback. On
// any error it registers nothing. It is a run-time error to pass a nil
// meter, lim or Option; the panic message begins "adaptiveotel: ".
func Register(meter metric.Meter, lim *adaptive.Limiter, opts ...Option) (metric.Registration, error) {
	if meter == nil {
		panic("adaptiveotel: nil Meter")
	}
	if lim == nil {
		panic("adaptiveotel: nil Limiter")
	}
	var c config
	for _, opt := range opts {
		if opt == nil {
			panic("adaptiveotel: nil Option")
		}
		opt(&c)
	}
	r := &reporter{lim: lim}
	if err := r.create(meter, c.attrs); err != nil {
		return nil, err
	}
	stop, err := lim.Observe(r.record)
	if err != nil {
		return nil, fmt.Errorf("adaptiveotel: the limiter is registered already, or has another observer: %w", err)
	}
	reg, err := meter.RegisterCallback(r.observe, r.limit, r.inFlight, r.waiting, r.requests)
	if err != nil {
		stop()
		return nil, fmt.Errorf("adaptiveotel: registering the callback: %w", err)
	}
	return &registration{callback: reg, stop: stop}, nil
}

// registration undoes a Register: the callback and the observer.
type registration struct {
	embedded.Registration
	callback metric.Registration
	stop     func()
	once     sync.Once
	err      error
}

// Unregister stops the reporting. Calling it again does nothing and
// returns the first call's error.
func (r *registration) Unregister() error {
	r.once.Do(func() {
		r.stop()
		r.err = r.callback.Unregister()
	})
	return r.err
}

// reporter holds the instruments and the attribute sets of one limiter,
// built once so that neither a collection nor a request rebuilds them.
type reporter struct {
	lim      *adaptive.Limiter
	limit    metric.Int64ObservableUpDownCounter
	inFlight metric.Int64ObservableUpDownCounter
	waiting  metric.Int64ObservableUpDownCounter
	duration metric.Float64Histogram
	requests metric.Int64ObservableCounter

	attrs                                 metric.MeasurementOption
	succeeded, dropped, ignored, rejected metric.MeasurementOption
	// ended holds the duration histogram's options by outcome, so that a
	// request records its duration without building them.
	ended [3][]metric.RecordOption
}

func (r *reporter) create(meter metric.Meter, attrs []attribute.KeyValue) error {
	var err error
	wrap := func(name string, err error) error {
		return fmt.Errorf("adaptiveotel: creating %s: %w", name, err)
	}
	if r.limit, err = meter.Int64ObservableUpDownCounter(LimitName, metric.WithUnit("{request}"),
		metric.WithDescription("The concurrency limit in force.")); err != nil {
		return wrap(LimitName, err)
	}
	if r.inFlight, err = meter.Int64ObservableUpDownCounter(InFlightName, metric.WithUnit("{request}"),
		metric.WithDescription("Requests admitted and not yet ended.")); err != nil {
		return wrap(InFlightName, err)
	}
	if r.waiting, err = meter.Int64ObservableUpDownCounter(WaitingName, metric.WithUnit("{request}"),
		metric.WithDescription("Requests waiting for a slot.")); err != nil {
		return wrap(WaitingName, err)
	}
	if r.duration, err = meter.Float64Histogram(DurationName, metric.WithUnit("s"),
		metric.WithDescription("Time from a request's admission to its end, by how it ended."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return wrap(DurationName, err)
	}
	if r.requests, err = meter.Int64ObservableCounter(RequestsName, metric.WithUnit("{request}"),
		metric.WithDescription("Requests by how they ended: succeeded, dropped, ignored, or rejected (shed).")); err != nil {
		return wrap(RequestsName, err)
	}
	with := func(outcome string) attribute.Set {
		kv := append(append([]attribute.KeyValue(nil), attrs...), OutcomeKey.String(outcome))
		return attribute.NewSet(kv...)
	}
	r.attrs = metric.WithAttributeSet(attribute.NewSet(attrs...))
	succeeded, dropped, ignored := with("succeeded"), with("dropped"), with("ignored")
	r.succeeded, r.dropped, r.ignored = metric.WithAttributeSet(succeeded), metric.WithAttributeSet(dropped), metric.WithAttributeSet(ignored)
	r.rejected = metric.WithAttributeSet(with("rejected"))
	r.ended[adaptive.Succeeded] = []metric.RecordOption{metric.WithAttributeSet(succeeded)}
	r.ended[adaptive.Dropped] = []metric.RecordOption{metric.WithAttributeSet(dropped)}
	r.ended[adaptive.Ignored] = []metric.RecordOption{metric.WithAttributeSet(ignored)}
	return nil
}

// record records one request's duration; the limiter calls it as each
// permit ends.
func (r *reporter) record(o adaptive.Outcome, rtt time.Duration) {
	r.duration.Record(context.Background(), rtt.Seconds(), r.ended[o]...)
}

// observe reports one snapshot of the limiter.
func (r *reporter) observe(_ context.Context, o metric.Observer) error {
	st := r.lim.Stats()
	o.ObserveInt64(r.limit, st.Limit, r.attrs)
	o.ObserveInt64(r.inFlight, st.InFlight, r.attrs)
	o.ObserveInt64(r.waiting, int64(st.Waiters), r.attrs)
	o.ObserveInt64(r.requests, int64(st.Succeeded), r.succeeded)
	o.ObserveInt64(r.requests, int64(st.Dropped), r.dropped)
	o.ObserveInt64(r.requests, int64(st.Ignored), r.ignored)
	o.ObserveInt64(r.requests, int64(st.Rejected), r.rejected)
	return nil
}
