package adaptive_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
)

// limitLog is a Controller that moves the limit to a new random value in
// [1, 16] every 100 µs of real time, and logs every value it returns, so
// that a request can learn which limits may have been in force while it
// was admitted. Entry i of the log is written before seq is raised past i.
type limitLog struct {
	last   time.Time
	limit  float64
	rng    *rand.Rand
	seq    atomic.Int64
	values []atomic.Int64
}

func newLimitLog(n int) *limitLog {
	return &limitLog{limit: 8, rng: rand.New(rand.NewPCG(1, 2)), values: make([]atomic.Int64, n)}
}

func (c *limitLog) Next(_ float64, s adaptive.Sample) float64 {
	if now := s.End(); now.Sub(c.last) >= 100*time.Microsecond {
		c.last = now
		c.limit = float64(1 + c.rng.IntN(16))
	}
	if i := c.seq.Load(); i < int64(len(c.values)) {
		c.values[i].Store(int64(c.limit))
		c.seq.Store(i + 1)
	}
	return c.limit
}

// highest returns the largest limit logged in [from, to), and the initial
// limit when from is before the first entry.
func (c *limitLog) highest(from, to int64, initial int64) int64 {
	h := int64(0)
	if from < 0 {
		h, from = initial, 0
	}
	for i := from; i < to; i++ {
		h = max(h, c.values[i].Load())
	}
	return h
}

// TestNoOverAdmission runs requests from many goroutines, half through
// TryAcquire and half through Acquire with short deadlines, while the
// controller moves the limit every 100 µs. A request counts itself in
// flight once admitted and uncounts itself before it ends, so the count it
// sees on admission is at most the permits out at that moment; those were
// each admitted while the permits out were below the limit in force, and
// that limit was one of the values logged from just before this request's
// acquire began (the one in force then may have been logged one entry
// earlier, its SetLimit not yet made) to just after its admission. The
// count must not exceed the largest of them.
func TestNoOverAdmission(t *testing.T) {
	const initial = 8
	ctrl := newLimitLog(1 << 20)
	lim := newLimiter(t, ctrl, 1, 16, initial)
	var inFlight atomic.Int64
	var admitted, violations atomic.Int64
	deadline := time.Now().Add(500 * time.Millisecond)

	workers := 16 * runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var p adaptive.Permit
			for i := 0; time.Now().Before(deadline); i++ {
				from := ctrl.seq.Load() - 2
				if w%2 == 0 {
					if !lim.TryAcquire(&p) {
						runtime.Gosched()
						continue
					}
				} else {
					ctx, cancel := context.WithTimeout(context.Background(), 200*time.Microsecond)
					err := lim.Acquire(ctx, &p)
					cancel()
					if err != nil {
						continue
					}
				}
				n := inFlight.Add(1)
				if n > ctrl.highest(from, ctrl.seq.Load(), initial) {
					violations.Add(1)
				}
				admitted.Add(1)
				runtime.Gosched() // hold the permit while others try to take one
				inFlight.Add(-1)
				if i%5 == 0 {
					p.Dropped()
				} else {
					p.Succeeded()
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d requests admitted, %d limits logged", admitted.Load(), ctrl.seq.Load())
	require.Zero(t, violations.Load(), "requests admitted above the limit in force")
	require.Greater(t, admitted.Load(), int64(1000))
	require.Equal(t, int64(0), lim.Stats().InFlight)
}
