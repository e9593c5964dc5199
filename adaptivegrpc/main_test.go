package adaptivegrpc_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: a handler
// still parked, a stream nobody ended, a connection left open.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
