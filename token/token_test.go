package token_test

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/atomic"

	"github.com/atomicsem/atomicsem/token"
)

// recordingOwner counts what tokens hand back to it, so a test can tell a
// permit returned twice from one returned once.
type recordingOwner struct {
	returned  atomic.Int64 // permits passed to ReturnPermits
	forgotten atomic.Int64 // permits passed to ForgetPermits
	calls     atomic.Int64 // calls of either method
}

func (o *recordingOwner) ReturnPermits(n int64) {
	o.returned.Add(n)
	o.calls.Inc()
}

func (o *recordingOwner) ForgetPermits(n int64) {
	o.forgotten.Add(n)
	o.calls.Inc()
}

// end calls Release or Forget by name, so table tests can list sequences.
func end(tok *token.Token, op string) {
	switch op {
	case "Release":
		tok.Release()
	case "Forget":
		tok.Forget()
	default:
		panic("unknown op " + op)
	}
}

// panicMessage runs f and returns what it panicked with, formatted, or ""
// if it returned normally.
func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

func TestPermitsBeforeAndAfterEnd(t *testing.T) {
	tests := []struct {
		name          string
		n             int64
		op            string
		wantReturned  int64
		wantForgotten int64
	}{
		{name: "release", n: 3, op: "Release", wantReturned: 3},
		{name: "forget", n: 3, op: "Forget", wantForgotten: 3},
		{name: "release empty", n: 0, op: "Release"},
		{name: "forget empty", n: 0, op: "Forget"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &recordingOwner{}
			tok := token.New(o, tt.n)
			require.Equal(t, tt.n, tok.Permits())
			end(&tok, tt.op)
			require.Zero(t, tok.Permits(), "a spent token holds nothing")
			require.Equal(t, tt.wantReturned, o.returned.Load())
			require.Equal(t, tt.wantForgotten, o.forgotten.Load())
			require.Equal(t, int64(1), o.calls.Load(), "the owner hears from the token once, even for 0 permits")
		})
	}
}

func TestZeroTokenHoldsNothingAndPanicsOnEnd(t *testing.T) {
	for _, op := range []string{"Release", "Forget"} {
		t.Run(op, func(t *testing.T) {
			var tok token.Token
			require.Zero(t, tok.Permits())
			msg := panicMessage(func() { end(&tok, op) })
			require.Equal(t, "token: "+op+" called on the zero Token", msg)
			require.Zero(t, tok.Permits())
		})
	}
}

func TestEndingTwicePanicsAndChangesNothing(t *testing.T) {
	tests := []struct {
		first, second string
	}{
		{"Release", "Release"},
		{"Release", "Forget"},
		{"Forget", "Release"},
		{"Forget", "Forget"},
	}
	for _, tt := range tests {
		t.Run(tt.first+"Then"+tt.second, func(t *testing.T) {
			o := &recordingOwner{}
			tok := token.New(o, 2)
			end(&tok, tt.first)
			returned, forgotten := o.returned.Load(), o.forgotten.Load()

			msg := panicMessage(func() { end(&tok, tt.second) })
			require.True(t, strings.HasPrefix(msg, "token: "), "panic %q lacks the package prefix", msg)
			require.Contains(t, msg, tt.second, "the message names the call that failed")
			require.Equal(t, returned, o.returned.Load(), "the failed call returned permits")
			require.Equal(t, forgotten, o.forgotten.Load(), "the failed call forgot permits")
			require.Equal(t, int64(1), o.calls.Load())
			require.Zero(t, tok.Permits())
		})
	}
}

// TestHandedOverTokenEndsOnce hands a token to another goroutine, which
// ends it, and then tries to end it again on the first: a token may change
// goroutines (here through a channel, which orders the two ends), and its
// guard still refuses the second end. Under -race this also shows that the
// guard, a plain field, needs no more synchronization than the hand-over.
func TestHandedOverTokenEndsOnce(t *testing.T) {
	for _, op := range []string{"Release", "Forget"} {
		t.Run(op, func(t *testing.T) {
			o := &recordingOwner{}
			tok := token.New(o, 5)
			handed := make(chan *token.Token)
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				end(<-handed, op)
			}()
			handed <- &tok
			<-ended

			msg := panicMessage(func() { end(&tok, op) })
			require.Equal(t, "token: "+op+" called on a token that was already released or forgotten", msg)
			require.Equal(t, int64(1), o.calls.Load(), "the owner must hear from the token once")
			require.Equal(t, int64(5), o.returned.Load()+o.forgotten.Load())
			require.Zero(t, tok.Permits())
		})
	}
}

// TestConcurrentEndsAreReportedByTheRaceDetector backs the promise in
// Token's doc that ending one token from two goroutines at once is reported
// by the race detector: it builds testdata/concurrentends, which does just
// that, with -race and requires the report to name Release.
func TestConcurrentEndsAreReportedByTheRaceDetector(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with -race")
	}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("the race detector is not supported on %s", runtime.GOARCH)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build with")
	}
	cmd := exec.CommandContext(t.Context(), goTool, "run", "-race", "./testdata/concurrentends")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the program must exit non-zero on the race; it said:\n%s", out)
	require.Contains(t, string(out), "WARNING: DATA RACE")
	require.Contains(t, string(out), "token.(*Token).Release")
}
