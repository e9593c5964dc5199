package token_test

import (
	"fmt"
	"strings"
	"sync"
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
			require.LessOrEqual(t, o.calls.Load(), int64(1))
		})
	}
}

func TestZeroTokenHoldsNothingAndPanicsOnEnd(t *testing.T) {
	for _, op := range []string{"Release", "Forget"} {
		t.Run(op, func(t *testing.T) {
			var tok token.Token
			require.Zero(t, tok.Permits())
			msg := panicMessage(func() { end(&tok, op) })
			require.True(t, strings.HasPrefix(msg, "token: "), "panic %q lacks the package prefix", msg)
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

// TestConcurrentEndsExactlyOneWins races two ends of one token many times:
// the spent flag must let exactly one through, or the owner would get the
// permits twice (or never).
func TestConcurrentEndsExactlyOneWins(t *testing.T) {
	const rounds = 500
	pairs := [][2]string{{"Release", "Release"}, {"Release", "Forget"}, {"Forget", "Forget"}}
	for _, ops := range pairs {
		t.Run(ops[0]+"And"+ops[1], func(t *testing.T) {
			for range rounds {
				o := &recordingOwner{}
				tok := token.New(o, 5)
				var panics atomic.Int64
				var start, wg sync.WaitGroup
				start.Add(1)
				for _, op := range ops {
					wg.Add(1)
					go func() {
						defer wg.Done()
						start.Wait()
						msg := panicMessage(func() { end(&tok, op) })
						if msg != "" {
							if !strings.HasPrefix(msg, "token: ") {
								t.Errorf("panic %q lacks the package prefix", msg)
							}
							panics.Inc()
						}
					}()
				}
				start.Done()
				wg.Wait()
				require.Equal(t, int64(1), panics.Load(), "exactly one end must fail")
				require.Equal(t, int64(1), o.calls.Load(), "the owner must hear from the token once")
				require.Equal(t, int64(5), o.returned.Load()+o.forgotten.Load())
				require.Zero(t, tok.Permits())
			}
		})
	}
}
