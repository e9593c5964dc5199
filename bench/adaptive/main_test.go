package adaptivebench_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a limiter under comparison leaves a goroutine
// behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
