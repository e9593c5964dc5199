package group_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/group"
)

// TestGoexitReleasesPermits checks that a function that ends its goroutine
// with runtime.Goexit (as t.FailNow does) still gives its permits back and
// still counts as returned for Wait.
func TestGoexitReleasesPermits(t *testing.T) {
	// In a bubble, a Wait that never returns is reported as a deadlock
	// rather than left to hang the test.
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 2, 2)
		g := group.New(sem)
		require.NoError(t, g.Go(background, 2, func() error { runtime.Goexit(); return nil }))
		require.NoError(t, g.Wait())
		requireIdle(t, sem)

		out, err := group.Map(background, sem, []int{1, 2, 3}, func(_ context.Context, x int) (int, error) {
			if x == 2 {
				runtime.Goexit()
			}
			return x, nil
		})
		// Map cannot tell a call that exited from one that returned; it
		// keeps the zero result for it.
		require.NoError(t, err)
		require.Equal(t, []int{1, 0, 3}, out)
		requireIdle(t, sem)
	})
}

// crashEnv names the environment variable that makes
// TestPanicReleasesPermitsBeforeTheCrash run its child's part.
const crashEnv = "GROUP_TEST_CRASH"

// TestPanicReleasesPermitsBeforeTheCrash checks that a panic in a function
// is not recovered (the program crashes, as with errgroup) and that the
// function's permits are back in the semaphore before it does. The test runs
// itself as a child process whose function panics with a value that, when
// the runtime prints it, which happens after every deferred call has run,
// reports the permits the semaphore still counts as held.
func TestPanicReleasesPermitsBeforeTheCrash(t *testing.T) {
	if how := os.Getenv(crashEnv); how != "" {
		crashChild(how)
		return
	}
	for _, how := range []string{"Go", "Map"} {
		t.Run(how, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestPanicReleasesPermitsBeforeTheCrash$")
			cmd.Env = append(os.Environ(), crashEnv+"="+how)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Skipf("cannot run the test binary as a child here: %v", err)
			}
			// The other function still holds its permit; the one that
			// panicked has given its own back.
			require.Contains(t, string(out), "permits held when the panic is printed: 1\n",
				"the child's output:\n%s", out)
		})
	}
}

// crashChild is the child's part: a function that panics while it and
// another hold one permit each.
func crashChild(how string) {
	sem, _ := atomicsem.New(2, 2)
	boom := func() { panic(heldProbe{sem}) }
	switch how {
	case "Go":
		g := group.New(sem)
		_ = g.Go(background, 1, func() error { select {} })
		_ = g.Go(background, 1, func() error { boom(); return nil })
		_ = g.Wait()
	case "Map":
		_, _ = group.Map(background, sem, []int{0, 1}, func(_ context.Context, x int) (int, error) {
			if x == 1 {
				boom()
			}
			select {}
		})
	}
	fmt.Println("the panic was recovered")
	os.Exit(0)
}

// heldProbe is a panic value whose message reports the permits held.
type heldProbe struct{ sem *atomicsem.Semaphore }

func (p heldProbe) Error() string {
	return fmt.Sprintf("permits held when the panic is printed: %d\n", p.sem.Stats().Held)
}

// slowPanicEnv names the environment variable that makes
// TestPanicKeepsWaitAndMapFromReturning run its child's part.
const slowPanicEnv = "GROUP_TEST_SLOW_PANIC"

// TestPanicKeepsWaitAndMapFromReturning checks that neither Wait nor Map
// returns while a function is panicking: the runtime calls the panic
// value's Error after every deferred call of the panicking goroutine has
// run, so a function that reported completion in a deferred call would let
// Wait return nil, and Map a made-up result, before the crash. The child's
// panic value takes half a second to print, so a Wait or Map that returns meanwhile
// says so on the child's output every run.
func TestPanicKeepsWaitAndMapFromReturning(t *testing.T) {
	if how := os.Getenv(slowPanicEnv); how != "" {
		slowPanicChild(how)
		return
	}
	for _, how := range []string{"Go", "Map"} {
		t.Run(how, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestPanicKeepsWaitAndMapFromReturning$")
			cmd.Env = append(os.Environ(), slowPanicEnv+"="+how)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the child did not crash (%v); its output:\n%s", err, out)
			}
			require.NotContains(t, string(out), "returned while a function was panicking", "the child's output:\n%s", out)
			require.Contains(t, string(out), "a slow panic", "the child's output:\n%s", out)
		})
	}
}

// slowPanicChild is the child's part: a function that panics with a value
// that is slow to print, and a Wait or Map that must not return before the
// program stops.
func slowPanicChild(how string) {
	sem, _ := atomicsem.New(2, 2)
	switch how {
	case "Go":
		g := group.New(sem)
		_ = g.Go(background, 1, func() error { panic(slowPanic{}) })
		err := g.Wait()
		fmt.Printf("Wait returned while a function was panicking: %v\n", err)
	case "Map":
		out, err := group.Map(background, sem, []int{0, 1}, func(_ context.Context, x int) (int, error) {
			if x == 1 {
				panic(slowPanic{})
			}
			return x + 1, nil
		})
		fmt.Printf("Map returned while a function was panicking: %v, %v\n", out, err)
	}
	os.Exit(0)
}

// slowPanic is a panic value that takes half a second to print.
type slowPanic struct{}

func (slowPanic) Error() string {
	time.Sleep(500 * time.Millisecond)
	return "a slow panic"
}
