package bench_test

import "testing"

// availcas is measured beside atomicsem, so it must keep a semaphore's
// contract on the paths it has.
func TestAvailCASCountsAndRefuses(t *testing.T) {
	const max = 1<<19 - 1
	s := newAvailCAS(2, 3, max) // one permit held elsewhere
	wantAvailable := func(want int64) {
		t.Helper()
		if got := s.available(); got != want {
			t.Fatalf("available = %d, want %d", got, want)
		}
	}

	two, ok := s.tryAcquire(2)
	if !ok {
		t.Fatal("could not acquire the 2 available permits")
	}
	wantAvailable(0)
	if _, ok := s.tryAcquire(1); ok {
		t.Fatal("acquired with nothing available")
	}
	two.Release()
	wantAvailable(2)
	if _, ok := s.tryAcquire(3); ok {
		t.Fatal("acquired more than available")
	}

	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("returning more than was held did not panic")
			}
		}()
		s.ReturnPermits(2, 0)
	}()
	wantAvailable(2) // the refused release changed nothing
	s.ReturnPermits(1, 0)
	wantAvailable(3)

	s.word.Store(s.word.Load() | availClosed)
	if _, ok := s.tryAcquire(1); ok {
		t.Fatal("acquired from a closed semaphore")
	}
}

// TestAvailCASRefusesInDebt checks the widest debt: every permit held and
// the limit lowered to zero, so the available count is −max.
func TestAvailCASRefusesInDebt(t *testing.T) {
	const max = 1<<19 - 1
	s := newAvailCAS(-max, 0, max)
	if got := s.available(); got != -max {
		t.Fatalf("available = %d, want %d", got, -max)
	}
	if _, ok := s.tryAcquire(max); ok {
		t.Fatal("acquired in debt")
	}
	s.ReturnPermits(max, 0)
	if got := s.available(); got != 0 {
		t.Fatalf("available = %d after returning every permit, want 0", got)
	}
}
