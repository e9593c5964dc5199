package event_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: a waiter
// that no Set reaches is the bug an event must not have.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
