package adaptive_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: a waiter
// left parked, or an HTTP connection left open.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
