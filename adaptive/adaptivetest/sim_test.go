package adaptivetest_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/atomicsem/atomicsem/adaptive/adaptivetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixedLimiter admits up to limit requests at once and counts the
// outcomes.
type fixedLimiter struct {
	limit, inFlight  int
	success, dropped atomic.Int64
}

type fixedRequest struct{ l *fixedLimiter }

func (r fixedRequest) Success() { r.l.inFlight--; r.l.success.Add(1) }
func (r fixedRequest) Dropped() { r.l.inFlight--; r.l.dropped.Add(1) }

func (l *fixedLimiter) TryAcquire() (adaptivetest.Request, bool) {
	if l.inFlight >= l.limit {
		return nil, false
	}
	l.inFlight++
	return fixedRequest{l}, true
}

func (l *fixedLimiter) Limit() int { return l.limit }

// TestRunModelsTheService checks the simulated service against a fixed
// limit, where the figures follow from the model: latency is flat up to
// the capacity and grows by a service time per capacity's worth of queue,
// goodput is the admitted share of the capacity, and a queue longer than
// the timeout allows turns into drops.
func TestRunModelsTheService(t *testing.T) {
	tests := []struct {
		name          string
		limit         int
		goodput       float64
		p99           time.Duration
		dropped, shed bool
		settled       bool
	}{
		{"at capacity", 100, 1, 20 * time.Millisecond, false, true, true},
		{"half capacity", 50, 0.5, 20 * time.Millisecond, false, true, false},
		{"twice capacity", 200, 1, 40 * time.Millisecond, false, true, false},
		{"past the timeout", 700, 1, 120 * time.Millisecond, true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &fixedLimiter{limit: tt.limit}
				res := adaptivetest.Run(l, adaptivetest.Config{Phases: []adaptivetest.Phase{
					{Duration: 2 * time.Second, Capacity: 100, Offered: 2},
				}})
				r := res[0]
				require.InDelta(t, tt.goodput, r.Goodput, 0.02)
				require.InDelta(t, tt.p99, r.P99, float64(time.Millisecond))
				require.Equal(t, tt.dropped, r.Dropped > 0)
				require.Equal(t, tt.shed, r.Shed > 0)
				require.Equal(t, tt.settled, r.Settle == 0, "settle %d", r.Settle)
				require.Equal(t, tt.limit, r.MinLimit)
				require.Equal(t, tt.limit, r.MaxLimit)
				require.Equal(t, 0, l.inFlight, "Run ends every request it admitted")
				require.GreaterOrEqual(t, l.success.Load()+l.dropped.Load(), int64(r.Samples))
			})
		})
	}
}
