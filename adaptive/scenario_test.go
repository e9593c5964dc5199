package adaptive_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptive/adaptivetest"
)

// TestFailureScenarios runs every controller through each of
// adaptivetest's failure scenarios (total failure, a hang until the
// deadline, an RTT the clock cannot resolve, a latency spike, bimodal
// latency, clients that cancel, a slow start) and requires it to pass each
// scenario's criterion. AIMD is given the Timeout its documentation
// recommends, a tenth above the latency of the scenario's typical request
// without a queue (for the bimodal service, a cache hit's).
// docs/adaptive.md tabulates the figures, beside the peers'.
func TestFailureScenarios(t *testing.T) {
	ctrls := []struct {
		name string
		ctrl func(typical time.Duration) adaptive.Controller
	}{
		{"AIMD", func(typical time.Duration) adaptive.Controller { return &adaptive.AIMD{Timeout: typical + typical/10} }},
		{"Vegas", func(time.Duration) adaptive.Controller { return &adaptive.Vegas{} }},
		{"Gradient2", func(time.Duration) adaptive.Controller { return &adaptive.Gradient2{} }},
	}
	for _, sc := range adaptivetest.Scenarios() {
		for _, c := range ctrls {
			t.Run(sc.Name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				synctest.Test(t, func(t *testing.T) {
					v := sc.Run(func(min, max, initial int) adaptivetest.Limiter {
						return adaptivetest.Adapt(newLimiter(t, c.ctrl(sc.Config.ServiceTime), int64(min), int64(max), int64(initial)))
					})
					t.Log(v.Figures)
					require.True(t, v.Pass, "%s: %s", sc.Criterion, v.Figures)
				})
			})
		}
	}
}
