package faultnet_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: a proxy
// must end every goroutine it starts when it is closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
