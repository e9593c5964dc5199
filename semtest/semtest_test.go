package semtest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/atomicsem/atomicsem/semtest"
)

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestNilArgumentsPanicWithThePackagePrefix calls every entry point of the
// package that takes a pointer, a function or an option with nil, and
// requires a panic in the package's voice that names it, before any check
// runs.
func TestNilArgumentsPanicWithThePackagePrefix(t *testing.T) {
	newSem := func(*testing.T, int64, int64) (semtest.Semaphore, error) {
		panic("no check may run")
	}
	tests := []struct {
		name string
		call func()
		want string
	}{
		{"Run(nil t)", func() { semtest.Run(nil, newSem) }, "nil *testing.T"},
		{"Run(nil NewFunc)", func() { semtest.Run(t, nil) }, "nil NewFunc"},
		{"Run(nil Option)", func() { semtest.Run(t, newSem, semtest.InBubble(), nil) }, "nil Option"},
		{"Join(nil)", func() { semtest.Join(nil) }, "nil JoinFunc"},
		{"Remote(nil t)", func() { semtest.Remote[remoteStats](nil, remoteSem{}) }, "nil testing.TB"},
		{"Remote(nil semaphore)", func() { semtest.Remote[remoteStats](t, nil) }, "nil RemoteSemaphore"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var msg string
			func() {
				defer func() { msg = fmt.Sprint(recover()) }()
				tt.call()
			}()
			require.True(t, strings.HasPrefix(msg, "semtest: "), "got %q", msg)
			require.Contains(t, msg, tt.want)
		})
	}
}
