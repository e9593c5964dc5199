package wire_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptive/adaptivetest/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestBackendModelsTheService checks the Backend against what its
// description promises, in fake time: a request takes a worker for the
// service time; one that finds every worker busy waits in line and is
// answered Overloaded after the queue timeout; one whose context ends
// leaves its worker at once; and each fault answers as documented.
func TestBackendModelsTheService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := wire.NewBackend(2, 5*time.Millisecond, 100*time.Millisecond)
		ctx := context.Background()
		serve := func(ctx context.Context) (wire.Answer, time.Duration) {
			start := time.Now()
			a := b.Serve(ctx)
			return a, time.Since(start)
		}
		a, d := serve(ctx)
		require.Equal(t, wire.OK, a)
		require.Equal(t, 5*time.Millisecond, d, "the service time")

		// Three at once on two workers: the third waits one service time.
		done := make(chan time.Duration, 3)
		for range 3 {
			go func() { _, d := serve(ctx); done <- d }()
		}
		got := []time.Duration{<-done, <-done, <-done}
		require.ElementsMatch(t, []time.Duration{5 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond}, got)

		// Two hold both workers past the queue timeout: a third is
		// Overloaded after it.
		b.Set(wire.Phase{Latency: 40})
		for range 2 {
			go serve(ctx)
		}
		synctest.Wait()
		a, d = serve(ctx)
		require.Equal(t, wire.Overloaded, a)
		require.Equal(t, 100*time.Millisecond, d, "the queue timeout")
		time.Sleep(time.Second)

		// A client that leaves frees its worker at once.
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		a, d = serve(cctx)
		cancel()
		require.Equal(t, wire.Gone, a)
		require.Equal(t, 50*time.Millisecond, d)

		for _, tt := range []struct {
			fault wire.Fault
			want  wire.Answer
			took  time.Duration
		}{
			{wire.FailFast, wire.Overloaded, 0},
			{wire.HangDeadline, wire.Overloaded, 100 * time.Millisecond},
			{wire.Hang, wire.Gone, 300 * time.Millisecond},
			{wire.Instant, wire.OK, 0},
		} {
			b.Set(wire.Phase{Fault: tt.fault})
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			a, d := serve(cctx)
			cancel()
			require.Equal(t, tt.want, a, "fault %d", tt.fault)
			require.Equal(t, tt.took, d, "fault %d", tt.fault)
		}
		b.Set(wire.Phase{Errors: 1})
		a, d = serve(ctx)
		require.Equal(t, wire.Error, a)
		require.Zero(t, d, "an error at once")
	})
}

// TestScenariosTellABrokenLimiter runs two of the standard scenarios in
// fake time with limiters that fail them on purpose, to show that the
// criteria can fail: a limit that never moves leaves the hang's requests
// hanging as the reference does, and a limit that sheds all but one
// request a time loses the healthy goodput.
func TestScenariosTellABrokenLimiter(t *testing.T) {
	byName := map[string]wire.Scenario{}
	for _, sc := range wire.Scenarios(wire.Short) {
		byName[sc.Name] = sc
	}
	tests := []struct {
		scenario string
		ctrl     adaptive.Controller
	}{
		{"hang until the client gives up", frozen{}},
		{"fast errors", floored{}},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := byName[tt.scenario].Run(wire.Pipes, wire.Handler, tt.ctrl)
				t.Log(v.Figures())
				require.True(t, v.Valid)
				require.False(t, v.Pass)
			})
		})
	}
}

// frozen is a Controller that never moves the limit.
type frozen struct{}

func (frozen) Next(limit float64, _ adaptive.Sample) float64 { return limit }

// floored is a Controller that keeps the limit at 1.
type floored struct{}

func (floored) Next(float64, adaptive.Sample) float64 { return 1 }
