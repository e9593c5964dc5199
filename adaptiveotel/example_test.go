package adaptiveotel_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptiveotel"
)

// Publish a limiter's limit, requests in flight and outcomes through
// OpenTelemetry. In a real process the meter comes from the global meter
// provider (otel.Meter) and an exporter reads it; here a manual reader
// shows what the exporter would see.
func Example() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())

	lim, err := adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(20, 1, 100))
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	reg, err := adaptiveotel.Register(provider.Meter("example.com/api"), lim, adaptiveotel.WithName("api"))
	if err != nil {
		panic(err)
	}
	defer reg.Unregister()

	// Twenty requests time out and none completes: the limit falls to its
	// minimum.
	for range 20 {
		var p adaptive.Permit
		lim.TryAcquire(&p)
		p.End(adaptive.Dropped)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch data := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, p := range data.DataPoints {
				outcome, ok := p.Attributes.Value(adaptiveotel.OutcomeKey)
				switch {
				case !ok:
					fmt.Println(m.Name, p.Value)
				case outcome.AsString() == "dropped":
					fmt.Println(m.Name, outcome.AsString(), p.Value)
				}
			}
		case metricdata.Histogram[float64]:
			for _, p := range data.DataPoints {
				outcome, _ := p.Attributes.Value(adaptiveotel.OutcomeKey)
				fmt.Println(m.Name, outcome.AsString(), "count", p.Count)
			}
		}
	}
	// Output:
	// atomicsem.adaptive.limit 1
	// atomicsem.adaptive.in_flight 0
	// atomicsem.adaptive.waiting 0
	// atomicsem.adaptive.request.duration dropped count 20
	// atomicsem.adaptive.requests dropped 20
}
