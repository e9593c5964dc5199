package overloadbench_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if an admission layer, the backend or the load
// generator leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
