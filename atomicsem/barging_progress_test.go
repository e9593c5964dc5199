package atomicsem_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
)

// Bug shape: in barging mode a release woke the front waiter to compete for
// a free permit, and before it ran the semaphore turned to hand-off for a
// waiter behind it. The woken waiter then found the permit free but, seeing
// the hand-off flag, queued again; no release was on its way to serve it, so
// with every goroutine parked the permit stayed free for ever.
func TestBargingWokenWaiterTakesFreePermitsDuringHandOff(t *testing.T) {
	tests := []struct {
		name  string
		limit int64
	}{
		{"limit=1", 1},
		{"limit=4", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A bound of a nanosecond makes every waiter that is passed over
			// starve at once, so the hand-off flag flips all the time.
			s, err := atomicsem.New(tt.limit, tt.limit,
				atomicsem.WithBarging(), atomicsem.WithStarvationBound(time.Nanosecond))
			require.NoError(t, err)
			const goroutines, rounds = 64, 1000
			// A stuck semaphore shows as acquires that time out instead of a
			// hung test run.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						tok, err := s.Acquire(ctx, 1)
						if err != nil {
							errs <- err
							return
						}
						// Yield while holding, so that others park behind.
						runtime.Gosched()
						tok.Release()
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err, "stats when it stopped: %+v", s.Stats())
			}
			require.Equal(t, atomicsem.Stats{Available: tt.limit, Limit: tt.limit, Max: tt.limit}, s.Stats())
		})
	}
}
