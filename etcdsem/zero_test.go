package etcdsem_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/etcdsem"
)

// The zero Semaphore is not a handle: every method panics at the call,
// saying so in etcdsem's words, instead of answering as a semaphore of
// maximum 0 or dereferencing its missing session. No server is needed to
// tell.
func TestZeroSemaphorePanicsSayingSo(t *testing.T) {
	ctx := context.Background()
	for name, call := range map[string]func(s *etcdsem.Semaphore){
		"Acquire":       func(s *etcdsem.Semaphore) { _, _ = s.Acquire(ctx, 1) },
		"AcquireFenced": func(s *etcdsem.Semaphore) { _, _, _ = s.AcquireFenced(ctx, 1) },
		"TryAcquire":    func(s *etcdsem.Semaphore) { _, _, _ = s.TryAcquire(ctx, 1) },
		"TryRelease":    func(s *etcdsem.Semaphore) { _, _ = s.TryRelease(ctx, 1) },
		"Refill":        func(s *etcdsem.Semaphore) { _, _ = s.Refill(ctx, 1) },
		"SetLimit":      func(s *etcdsem.Semaphore) { _ = s.SetLimit(ctx, 1) },
		"Close":         func(s *etcdsem.Semaphore) { _ = s.Close(ctx) },
		"TryForget":     func(s *etcdsem.Semaphore) { _, _, _ = s.TryForget(ctx, 1) },
		"Stats":         func(s *etcdsem.Semaphore) { _, _ = s.Stats(ctx) },
		"WaitIdle":      func(s *etcdsem.Semaphore) { _ = s.WaitIdle(ctx) },
		"Parked":        func(s *etcdsem.Semaphore) { _, _ = s.Parked(ctx) },
		"Prefix":        func(s *etcdsem.Semaphore) { s.Prefix() },
		"Max":           func(s *etcdsem.Semaphore) { s.Max() },
		"Done":          func(s *etcdsem.Semaphore) { s.Done() },
		"Err":           func(s *etcdsem.Semaphore) { _ = s.Err() },
	} {
		t.Run(name, func(t *testing.T) {
			var zero etcdsem.Semaphore
			msg := panicMessage(func() { call(&zero) })
			require.True(t, strings.HasPrefix(msg, "etcdsem: "+name+" on a zero Semaphore"), "panic %q", msg)
		})
	}
}
