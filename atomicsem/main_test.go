package atomicsem_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: a parked
// waiter that nobody wakes is exactly the bug a semaphore must not have.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
