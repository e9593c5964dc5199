package fuzz_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/event"
)

// FuzzAutoReset drives an event.AutoReset from one goroutine against a model
// that is a single flag: Set raises it, Reset, TryWait and a successful Wait
// lower it, and a Wait with a done context fails without touching it. A Wait
// with a live context is only issued when the flag is up, so nothing waits.
func FuzzAutoReset(f *testing.F) {
	for _, seed := range autoResetSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var (
			e   event.AutoReset
			set bool // the model
			log opLog
		)
		d := &decoder{b: data}
		for step := 0; step < 64 && d.more(); step++ {
			switch d.next() % 6 {
			case 0:
				log = append(log, "Set")
				e.Set()
				set = true
			case 1:
				log = append(log, "Reset")
				e.Reset()
				set = false
			case 2:
				log = append(log, "TryWait")
				require.Equal(t, set, e.TryWait(), &log)
				set = false
			case 3:
				ctx := doneContext(d.next())
				log = append(log, fmt.Sprintf("Wait(done %v)", ctx.Err()))
				require.Equal(t, ctx.Err(), e.Wait(ctx), &log)
			case 4:
				if !set {
					log = append(log, "skip Wait(live): it would wait")
					continue
				}
				log = append(log, "Wait(live)")
				ctx, cancel := context.WithTimeout(context.Background(), acquireGuard)
				err := e.Wait(ctx)
				cancel()
				require.NoError(t, err, "%s: waited although the event is set", &log)
				set = false
			case 5:
				log = append(log, "receive from C")
				select {
				case <-e.C():
					require.True(t, set, "%s: received from an unset event", &log)
				default:
					require.False(t, set, "%s: nothing to receive from a set event", &log)
				}
				set = false
			}
		}
		require.Equal(t, set, e.TryWait(), "final state after %s", &log)
	})
}

// opLog lists the operations of a run. Assertions take a pointer to it as
// their message argument, so that it is joined only when one fails.
type opLog []string

// String returns the operations joined with semicolons.
func (l *opLog) String() string { return strings.Join(*l, "; ") }
