package adaptiveotel_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptiveotel"
)

// pinned is a Controller that moves the limit, at each sample, to the
// value the test last set.
type pinned struct{ to atomic.Int64 }

func (c *pinned) Next(limit float64, _ adaptive.Sample) float64 {
	if to := c.to.Load(); to > 0 {
		return float64(to)
	}
	return limit
}

// newLimiter returns a limiter in [1, 100] starting at initial, moved by
// the returned controller.
func newLimiter(t testing.TB, initial int64) (*adaptive.Limiter, *pinned) {
	t.Helper()
	ctrl := &pinned{}
	lim, err := adaptive.New(ctrl, adaptive.WithLimits(initial, 1, 100))
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	return lim, ctrl
}

// newMeter returns a meter of an SDK meter provider read by hand.
func newMeter(t testing.TB) (*sdkmetric.MeterProvider, *sdkmetric.ManualReader) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, provider.Shutdown(context.Background())) })
	return provider, reader
}

// collect reads every data point, keyed "name{k=v,...}", with the attribute
// keys shortened as short does; a histogram's point gives two, its count
// ("name{...} count") and its sum ("name{...} sum").
func collect(t testing.TB, reader *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	points := map[string]float64{}
	key := func(name string, set attribute.Set) string {
		return name + "{" + short(set.Encoded(attribute.DefaultEncoder())) + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, p := range data.DataPoints {
					points[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range data.DataPoints {
					points[key(m.Name, p.Attributes)] = p.Value
				}
			case metricdata.Sum[int64]:
				require.Equal(t, m.Name == adaptiveotel.RequestsName, data.IsMonotonic,
					"%s: only requests is a counter, the others up-down counters", m.Name)
				require.Equal(t, metricdata.CumulativeTemporality, data.Temporality)
				for _, p := range data.DataPoints {
					points[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range data.DataPoints {
					points[key(m.Name, p.Attributes)+" count"] = float64(p.Count)
					points[key(m.Name, p.Attributes)+" sum"] = p.Sum
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return points
}

// short drops the instruments' namespace from the attribute keys of an
// encoded set, so that the tests' keys stay readable: limiter.name=api,
// outcome=dropped.
func short(encoded string) string {
	return strings.ReplaceAll(encoded, "atomicsem.adaptive.", "")
}

// dump prints points sorted by key, one a line.
func dump(points map[string]float64) string {
	keys := make([]string, 0, len(points))
	for k := range points {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %g\n", k, points[k])
	}
	return b.String()
}
