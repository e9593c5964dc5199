package event_test

import (
	"context"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/event"
)

// allocRuns is how many fresh events each allocation test uses.
const allocRuns = 100

// TestAutoResetFirstUseAllocatesOnlyTheChannel pins the cost of an event: a
// fresh AutoReset's first wait makes one object (the channel), and Set,
// Reset and TryWait before any wait make nothing, since the channel is left
// to the first waiter. A second object would mean the channel is held
// through an extra box.
func TestAutoResetFirstUseAllocatesOnlyTheChannel(t *testing.T) {
	skipUnderRace(t)
	tests := []struct {
		name   string
		use    func(e *event.AutoReset)
		allocs float64
	}{
		{"Set", func(e *event.AutoReset) { e.Set() }, 0},
		{"Reset", func(e *event.AutoReset) { e.Reset() }, 0},
		{"TryWait", func(e *event.AutoReset) { e.TryWait() }, 0},
		{"SetThenTryWait", func(e *event.AutoReset) { e.Set(); e.TryWait() }, 0},
		{"C", func(e *event.AutoReset) { _ = e.C() }, 1},
		{"SetThenWait", func(e *event.AutoReset) {
			e.Set()
			if err := e.Wait(context.Background()); err != nil {
				panic(err)
			}
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The events exist before the count starts, so only what their
			// first use makes is counted. AllocsPerRun calls the function
			// once more than allocRuns, as a warm-up.
			events := make([]event.AutoReset, allocRuns+1)
			next := 0
			allocs := testing.AllocsPerRun(allocRuns, func() {
				tt.use(&events[next])
				next++
			})
			require.Equal(t, allocRuns+1, next, "every run must use a fresh event")
			require.Equal(t, tt.allocs, allocs)
		})
	}
}

// TestAutoResetUseAfterFirstAllocatesNothing checks that the channel, once
// made, is reused by every later Set, Wait, TryWait, Reset and C.
func TestAutoResetUseAfterFirstAllocatesNothing(t *testing.T) {
	skipUnderRace(t)
	var e event.AutoReset
	_ = e.C() // first wait: makes the channel
	ctx := context.Background()
	allocs := testing.AllocsPerRun(allocRuns, func() {
		e.Set()
		if err := e.Wait(ctx); err != nil {
			panic(err)
		}
		e.Set()
		<-e.C()
		e.Set()
		e.Reset()
		e.TryWait()
	})
	require.Equal(t, 0.0, allocs)
}

// TestAutoResetIsOneWord pins the size of an event, which every parked
// semaphore waiter embeds: the channel is held directly, not behind a box.
func TestAutoResetIsOneWord(t *testing.T) {
	var e event.AutoReset
	require.Equal(t, unsafe.Sizeof(uintptr(0)), unsafe.Sizeof(e))
}
