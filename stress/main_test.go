package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: every worker,
// waiter and probe of a run must have returned when run does.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
