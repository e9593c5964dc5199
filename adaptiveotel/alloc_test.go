package adaptiveotel_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptiveotel"
)

// TestRecordingDoesNotAllocate: with the limiter registered on the SDK's
// meter, a request that ends, and the duration it records, touch no heap:
// the histogram's attribute sets are built once, at Register.
func TestRecordingDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race build gives every token a cell of its own to catch copies, an allocation")
	}
	lim, _ := newLimiter(t, 10)
	provider, _ := newMeter(t)
	reg, err := adaptiveotel.Register(provider.Meter("test"), lim, adaptiveotel.WithName("api"))
	require.NoError(t, err)
	defer reg.Unregister()
	for _, o := range []adaptive.Outcome{adaptive.Succeeded, adaptive.Dropped, adaptive.Ignored} {
		t.Run(o.String(), func(t *testing.T) {
			var p adaptive.Permit
			end := func() {
				if !lim.TryAcquire(&p) {
					t.Fatal("TryAcquire failed")
				}
				p.End(o)
			}
			end() // the SDK makes each attribute set's aggregator on its first measurement
			require.Zero(t, testing.AllocsPerRun(1000, end))
		})
	}
}
