package token_test

import (
	"fmt"
	"math"
	"os/exec"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"sync/atomic"

	"github.com/atomicsem/atomicsem/token"
)

// recordingOwner counts what tokens hand back to it, so a test can tell a
// permit returned twice from one returned once.
type recordingOwner struct {
	returned  atomic.Int64  // permits passed to ReturnPermits
	forgotten atomic.Int64  // permits passed to ForgetPermits
	calls     atomic.Int64  // calls of either method
	splits    atomic.Int64  // calls of SplitPermits
	lastTag   atomic.Uint32 // the tag of the last call
}

func (o *recordingOwner) ReturnPermits(n int64, tag uint32) {
	o.returned.Add(n)
	o.calls.Add(1)
	o.lastTag.Store(tag)
}

func (o *recordingOwner) ForgetPermits(n int64, tag uint32) {
	o.forgotten.Add(n)
	o.calls.Add(1)
	o.lastTag.Store(tag)
}

// SplitPermits keeps the owner and moves the tag on by one, so that a test
// can see that both parts carry what it returned.
func (o *recordingOwner) SplitPermits(_, _ int64, tag uint32) (token.Owner, uint32) {
	o.splits.Add(1)
	return o, tag + 1
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
			tok := token.New(o, tt.n, 7)
			require.Equal(t, tt.n, tok.Permits())
			end(&tok, tt.op)
			require.Zero(t, tok.Permits(), "a spent token holds nothing")
			require.Equal(t, tt.wantReturned, o.returned.Load())
			require.Equal(t, tt.wantForgotten, o.forgotten.Load())
			require.Equal(t, int64(1), o.calls.Load(), "the owner hears from the token once, even for 0 permits")
			require.Equal(t, uint32(7), o.lastTag.Load(), "the owner gets back the tag it issued")
		})
	}
}

// Split moves part of a token's permits into a new token; the owner hears
// of it once, both parts carry the owner and tag it returns, and each part
// ends once with its own count.
func TestSplitPartsEndOnTheirOwn(t *testing.T) {
	tests := []struct {
		name       string
		n, k       int64
		keep, part string // how each part ends
	}{
		{name: "spend part, return the rest", n: 10, k: 3, keep: "Release", part: "Forget"},
		{name: "return part, spend the rest", n: 10, k: 3, keep: "Forget", part: "Release"},
		{name: "split off nothing", n: 4, k: 0, keep: "Release", part: "Release"},
		{name: "split off everything", n: 4, k: 4, keep: "Release", part: "Forget"},
		{name: "empty token", n: 0, k: 0, keep: "Forget", part: "Release"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &recordingOwner{}
			tok := token.New(o, tt.n, 7)
			part, ok := tok.Split(tt.k)
			require.True(t, ok)
			require.Equal(t, int64(1), o.splits.Load())
			require.Equal(t, tt.n-tt.k, tok.Permits())
			require.Equal(t, tt.k, part.Permits())

			end(&part, tt.part)
			require.Equal(t, uint32(8), o.lastTag.Load(), "the part carries the tag SplitPermits returned")
			end(&tok, tt.keep)
			require.Equal(t, uint32(8), o.lastTag.Load(), "so does the token split")
			require.Equal(t, int64(2), o.calls.Load())
			want := map[string]int64{}
			want[tt.part] += tt.k
			want[tt.keep] += tt.n - tt.k
			require.Equal(t, want["Release"], o.returned.Load())
			require.Equal(t, want["Forget"], o.forgotten.Load())

			for _, tok := range []*token.Token{&tok, &part} {
				msg := panicMessage(func() { tok.Release() })
				require.Contains(t, msg, "token: Release called on a token that was already released or forgotten")
			}
		})
	}
}

// A Split that asks for more than the token holds, or for a negative
// count, reports false and changes nothing; a Split of a spent or zero
// token is a caller bug and panics.
func TestSplitRefusesBadCountsAndPanicsOnSpentTokens(t *testing.T) {
	o := &recordingOwner{}
	tok := token.New(o, 3, 7)
	for _, k := range []int64{-1, 4, math.MaxInt64, math.MinInt64} {
		part, ok := tok.Split(k)
		require.False(t, ok, "Split(%d)", k)
		require.Zero(t, part.Permits())
		require.Equal(t, int64(3), tok.Permits())
	}
	require.Zero(t, o.splits.Load(), "a refused split does not reach the owner")
	tok.Release()
	require.Equal(t, "token: Split called on a token that was already released or forgotten",
		panicMessage(func() { tok.Split(1) }))
	var zero token.Token
	require.Equal(t, "token: Split called on the zero Token", panicMessage(func() { zero.Split(0) }))
	require.Equal(t, int64(1), o.calls.Load())
	require.Equal(t, int64(3), o.returned.Load())
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

func TestEmptyTokenEndsOnceAndSplitsIntoEmptyTokens(t *testing.T) {
	for _, op := range []string{"Release", "Forget"} {
		t.Run(op, func(t *testing.T) {
			tok := token.Empty()
			require.Zero(t, tok.Permits())
			part, ok := tok.Split(0)
			require.True(t, ok)
			_, ok = tok.Split(1)
			require.False(t, ok, "an empty token has nothing to split off")
			end(&part, op)
			end(&tok, op)
			msg := panicMessage(func() { end(&tok, op) })
			require.Equal(t, "token: "+op+" called on a token that was already released or forgotten", msg)
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
			tok := token.New(o, 2, 7)
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
			tok := token.New(o, 5, 7)
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

// A token returned from every acquire is cheap only while the compiler
// keeps it in registers, which it does for a struct of at most four fields
// and four words: a fifth field, even a zero-size marker, sends every
// returned token through stack copies. (Under the race detector the token
// also carries a pointer to its cell, and is larger.)
func TestTokenFitsInRegisters(t *testing.T) {
	typ := reflect.TypeFor[token.Token]()
	require.LessOrEqual(t, typ.NumField(), 4, "fields of token.Token")
	if unsafe.Sizeof(uintptr(0)) == 8 && !raceEnabled { // on 32-bit platforms its int64 alone takes two words
		require.LessOrEqual(t, typ.Size(), uintptr(32), "size of token.Token")
	}
}

// TestNilArgumentsPanicWithThePackagePrefix calls every entry point of the
// package that takes a pointer or an interface with nil, and requires a
// panic in the package's voice. A nil *Token's Release and Forget are the
// exception outside the race detector: a check would take them over the
// compiler's inlining budget, so the runtime's nil dereference reports it.
func TestNilArgumentsPanicWithThePackagePrefix(t *testing.T) {
	var nilTok *token.Token
	tests := []struct {
		name     string
		call     func()
		raceOnly bool
	}{
		{"New(nil owner)", func() { token.New(nil, 1, 0) }, false},
		{"(*Token)(nil).Split", func() { nilTok.Split(0) }, false},
		{"(*Token)(nil).Permits", func() { nilTok.Permits() }, false},
		{"(*Token)(nil).Release", func() { nilTok.Release() }, true},
		{"(*Token)(nil).Forget", func() { nilTok.Forget() }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := panicMessage(tt.call)
			if tt.raceOnly && !raceEnabled {
				require.Contains(t, msg, "nil pointer dereference")
				return
			}
			require.True(t, strings.HasPrefix(msg, "token: "), "got %q", msg)
			require.Contains(t, msg, "nil")
		})
	}
}

// TestEndingAStaleCopyPanicsUnderRace checks the race build's tracking: of a
// token and its copies only the first to end does, whichever it is, and
// every later end, Split included, panics before it reaches the owner. Outside
// the race detector a copy's end reaches the owner, which is what the
// tracking exists to catch.
func TestEndingAStaleCopyPanicsUnderRace(t *testing.T) {
	for _, first := range []string{"Release", "Forget"} {
		for _, second := range []string{"Release", "Forget", "Split"} {
			t.Run(first+"/then/"+second, func(t *testing.T) {
				o := new(recordingOwner)
				tok := token.New(o, 2, 0)
				copied := copyToken(&tok)
				end(&tok, first)
				require.Equal(t, int64(1), o.calls.Load())
				var msg string
				if second == "Split" {
					msg = panicMessage(func() { copied.Split(1) })
				} else {
					msg = panicMessage(func() { end(copied, second) })
				}
				if !raceEnabled {
					if second != "Split" {
						require.Equal(t, int64(2), o.calls.Load(), "without the race detector the copy reaches the owner")
					}
					return
				}
				require.True(t, strings.HasPrefix(msg, "token: "+second+" called on a copy"), "got %q", msg)
				require.Equal(t, int64(1), o.calls.Load(), "the copy's end reached the owner")
				require.Equal(t, int64(2), copied.Permits(), "a refused end changes nothing")
			})
		}
	}
}

// TestSplitPartsAreTrackedOnTheirOwn checks that under the race detector the
// part split off a token has a cell of its own: ending it does not
// make the rest look like an ended copy, and a copy of the part is caught.
func TestSplitPartsAreTrackedOnTheirOwn(t *testing.T) {
	o := new(recordingOwner)
	tok := token.New(o, 3, 0)
	part, ok := tok.Split(1)
	require.True(t, ok)
	partCopy := copyToken(&part)
	part.Release()
	tok.Release()
	require.Equal(t, int64(3), o.returned.Load())
	msg := panicMessage(func() { partCopy.Release() })
	if raceEnabled {
		require.True(t, strings.HasPrefix(msg, "token: Release called on a copy"), "got %q", msg)
		require.Equal(t, int64(3), o.returned.Load())
	}
}

// copyToken copies a token the way a careless caller's assignment would,
// through reflection so that go vet does not report the copy the test
// makes on purpose.
func copyToken(src *token.Token) *token.Token {
	dst := new(token.Token)
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
	return dst
}

// TestRaceBuildCatchesAStaleCopy backs the promise in Token's doc that
// under the race detector ending a copy of a token after the original
// panics before the permits reach the semaphore: it builds
// testdata/stalecopy, which does that on atomicsem's fast path, with -race
// (so that this test also checks the race build from a test binary built
// without it), and requires the panic and the count of permits held.
func TestRaceBuildCatchesAStaleCopy(t *testing.T) {
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
	cmd := exec.CommandContext(t.Context(), goTool, "run", "-race", "./testdata/stalecopy")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "panic: token: Release called on a copy of a token")
	require.Contains(t, string(out), "held: 1\n", "the copy's end reached the semaphore")
}
