package bench_test

import (
	"context"
	"errors"
	"testing"
)

// tokencas and wordcas stand for the least a semaphore with atomicsem's
// Acquire can cost, so their acquire must keep the part of its contract
// that costs something: a done context fails even with permits free, and
// the permits are counted.
func TestCASFloorsAcquireChecksTheContextFirst(t *testing.T) {
	for _, im := range pick("tokencas", "wordcas") {
		t.Run(im.name, func(t *testing.T) {
			s := im.new(2, 2)
			done, cancel := context.WithCancel(context.Background())
			cancel()
			if err := s.acquire(done, 1, new(held)); !errors.Is(err, context.Canceled) {
				t.Fatalf("acquire with a done ctx returned %v, want context.Canceled", err)
			}

			// Both permits are still free: the refused acquire took none.
			ctx := context.Background()
			a, b := new(held), new(held)
			if err := s.acquire(ctx, 1, a); err != nil {
				t.Fatalf("first acquire: %v", err)
			}
			if err := s.acquire(ctx, 1, b); err != nil {
				t.Fatalf("second acquire: %v", err)
			}
			if err := s.acquire(ctx, 1, new(held)); !errors.Is(err, errWouldWait) {
				t.Fatalf("acquire beyond the limit returned %v, want errWouldWait", err)
			}
			s.release(a)
			if err := s.acquire(ctx, 1, a); err != nil {
				t.Fatalf("acquire after a release: %v", err)
			}
			s.release(a)
			s.release(b)
		})
	}
}
