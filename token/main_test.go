package token_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind, so the
// concurrent tests cannot hide a goroutine stuck in Release or Forget.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
