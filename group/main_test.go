package group_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: a function
// of a group, or a worker or waiter of Map, that outlives the call that owns
// it is exactly the bug a group must not have.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
