package atomicsem_test

// What the fast paths cost, checked as facts: which operations allocate,
// and what the compiler inlines.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
)

// allocRuns is how many times each allocation check repeats its operation.
const allocRuns = 200

// TestFastPathsDoNotAllocate checks the operations that never wait: a token
// is a value, so taking and returning permits must not touch the heap.
func TestFastPathsDoNotAllocate(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		op   func(t *testing.T, s *atomicsem.Semaphore)
	}{
		{"Acquire+Release", func(t *testing.T, s *atomicsem.Semaphore) {
			tok, err := s.Acquire(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			tok.Release()
		}},
		{"TryAcquire+Release", func(t *testing.T, s *atomicsem.Semaphore) {
			tok, ok := s.TryAcquire(1)
			if !ok {
				t.Fatal("TryAcquire failed on a free semaphore")
			}
			tok.Release()
		}},
		{"Acquire+Forget+TryRelease", func(t *testing.T, s *atomicsem.Semaphore) {
			tok, err := s.Acquire(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			tok.Forget()
			if !s.TryRelease(1) {
				t.Fatal("TryRelease failed after Forget")
			}
		}},
		{"SetLimit", func(t *testing.T, s *atomicsem.Semaphore) {
			if err := s.SetLimit(1); err != nil {
				t.Fatal(err)
			}
		}},
	}
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				skipUnderRace(t)
				s := mustNew(t, 1, 1, opts...)
				allocs := testing.AllocsPerRun(allocRuns, func() { tt.op(t, s) })
				require.Zero(t, allocs, "allocations per %s", tt.name)
			})
		}
	})
}

// TestParkedAcquireDoesNotAllocate checks the slow path in steady state: an
// Acquire that parks until a release from another goroutine serves it reuses
// a waiter record and its channel, so that a semaphore under contention does
// not feed the garbage collector.
func TestParkedAcquireDoesNotAllocate(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		skipUnderRace(t)
		s := mustNew(t, 1, 1, opts...)
		slot := mustTake(t, s, 1)
		releaser := startWorker(func() {
			awaitWaiters(s, 1)
			slot.Release()
		})
		// A deadline, made before the measured runs, turns a lost wake-up
		// into a quick failure rather than a hung test.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		allocs := testing.AllocsPerRun(allocRuns, func() {
			releaser.kick()
			var err error
			// The release synchronizes before Acquire returns, so the
			// helper is done with slot when it is written here.
			*slot, err = s.Acquire(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
		})
		releaser.stop()
		slot.Release()
		require.Zero(t, allocs, "allocations per parked Acquire")
	})
}

// TestCancelledAcquireAllocatesNothingBeyondItsContext checks cancellation:
// an Acquire that parks and then gives up, because its context is cancelled,
// leaves nothing behind for the garbage collector. The contexts are made
// before the measured runs, so what is measured is the semaphore's share.
func TestCancelledAcquireAllocatesNothingBeyondItsContext(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		skipUnderRace(t)
		s := mustNew(t, 0, 1, opts...)
		// AllocsPerRun runs the function once more than asked, to warm up.
		ctxs := make([]context.Context, allocRuns+1)
		cancels := make([]context.CancelFunc, allocRuns+1)
		for i := range ctxs {
			ctxs[i], cancels[i] = context.WithCancel(context.Background())
			defer cancels[i]()
			// A context makes its Done channel on first request; make it
			// now, outside the measured runs.
			_ = ctxs[i].Done()
		}
		next := 0
		canceller := startWorker(func() {
			awaitWaiters(s, 1)
			cancels[next]()
		})
		allocs := testing.AllocsPerRun(allocRuns, func() {
			canceller.kick()
			_, err := s.Acquire(ctxs[next], 1)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Acquire returned %v, want context.Canceled", err)
			}
			next++
		})
		canceller.stop()
		require.Zero(t, allocs, "allocations per cancelled Acquire")
		require.Equal(t, atomicsem.Stats{Max: 1}, s.Stats())
	})
}

// Comments in the library rely on what the compiler inlines: the fast
// paths of an acquire, of a TryForget and of a token's end are inlined
// into their callers, the token's Release and Forget into code that
// imports atomicsem alone, and the dispatch's return of permits calls
// state.Word.Release inline. A change that pushes one of them over the
// inlining budget makes its comment false and the fast path slower; this
// test says which, and logs what each has left of the budget.
func TestInliningFactsTheCommentsRelyOn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the packages with -gcflags=-m")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build with")
	}
	// The facts are those of amd64, where the 64-bit atomics are compiler
	// intrinsics; a 32-bit build turns them into calls, which cost more
	// than the inlining budget allows. So the packages are built for amd64
	// whatever platform the test itself runs on.
	build := func(pkgs ...string) string {
		args := append([]string{"build", "-o", os.DevNull, "-gcflags=-m=2"}, pkgs...)
		cmd := exec.CommandContext(t.Context(), goTool, args...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "GOARCH=amd64")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	lib := build("./atomicsem", "./token")
	// The inlinable fast paths and what each has left of the budget: a
	// change that spends a margin makes the next one push the function
	// over, so the margins are named here and logged on every run.
	for _, fn := range []struct {
		name   string
		margin int // the budget less the cost when this was written
	}{
		{"(*Semaphore).acquireFast", 4},
		{"(*Semaphore).releaseFast", 8},
		{"(*Semaphore).forgetFast", 0},
		{"(*Token).Release", 1},
		{"(*Token).Forget", 1},
		{"(*Semaphore).Held", 5},
	} {
		cost, ok := inlineCost(lib, fn.name)
		require.True(t, ok, "%s is no longer inlinable (it had %d to spare)", fn.name, fn.margin)
		t.Logf("%s: cost %d of %d, %d to spare (was %d)", fn.name, cost, inlineBudget, inlineBudget-cost, fn.margin)
	}
	require.True(t, hasLine(lib, "atomicsem/dispatch.go", "inlining call to state.Word.Release"),
		"releaseLocked no longer inlines state.Word.Release")
	require.True(t, hasLine(lib, "atomicsem/acquire.go", "inlining call to (*Semaphore).acquireFast"),
		"Acquire and TryAcquire no longer inline acquireFast")
	require.True(t, hasLine(lib, "atomicsem/release.go", "inlining call to (*Semaphore).releaseFast"),
		"the token owners no longer inline releaseFast")

	adaptive := build("./adaptive")
	require.True(t, hasLine(adaptive, "adaptive/limiter.go", "inlining call to atomicsem.(*Semaphore).Held"),
		"package adaptive's admission no longer inlines Held")

	caller := build("./atomicsem/testdata/caller")
	require.Contains(t, caller, "inlining call to token.(*Token).Release",
		"a caller that imports atomicsem alone no longer inlines Release")
	require.Contains(t, caller, "inlining call to token.(*Token).Forget",
		"a caller that imports atomicsem alone no longer inlines Forget")
}

// inlineBudget is the compiler's budget for inlining a function.
const inlineBudget = 80

// inlineCost returns the cost -gcflags=-m=2 reports for fn, if it reports
// fn inlinable.
func inlineCost(out, fn string) (int, bool) {
	prefix := "can inline " + fn + " with cost "
	for _, line := range strings.Split(out, "\n") {
		if _, rest, ok := strings.Cut(line, prefix); ok {
			cost, _, _ := strings.Cut(rest, " ")
			n, err := strconv.Atoi(cost)
			return n, err == nil
		}
	}
	return 0, false
}

// hasLine reports whether out has a line from file that contains fact.
func hasLine(out, file, fact string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, file) && strings.Contains(line, fact) {
			return true
		}
	}
	return false
}
