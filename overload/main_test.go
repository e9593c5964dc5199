package overload_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: a gate runs
// none of its own, and a waiter that gives up must leave nothing running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
