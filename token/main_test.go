package token_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind, so the
// tests that hand tokens between goroutines cannot hide one left behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
