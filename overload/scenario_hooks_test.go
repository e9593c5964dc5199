//go:build atomicsem_hooks

package overload_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/internal/hook"
	"github.com/atomicsem/atomicsem/overload"
)

// TestScenarioAnAdmissionBetweenLoadAndCASIsSeen stops an Acquire on its
// fast path between its load of the word and its CAS, admits another
// request meanwhile, and lets the first go on: its CAS must fail on the
// word that moved, and the request wait, as the limit of 1 is taken. An
// admission that checked one load and counted in another step (Netflix's
// check-then-act) would admit both.
func TestScenarioAnAdmissionBetweenLoadAndCASIsSeen(t *testing.T) {
	g := overload.MustNew(1, 1, classes(0, 0))
	stopped, resume := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	restore := hook.Set(func(site hook.Site) {
		if site == hook.BeforeCAS && once.CompareAndSwap(false, true) {
			close(stopped)
			<-resume
		}
	})
	defer restore()
	type result struct {
		held int64
		err  error
	}
	done := make(chan result, 1)
	go func() {
		tok, err := g.Acquire(context.Background(), 0, 1)
		done <- result{tok.Permits(), err}
		if err == nil {
			tok.Release()
		}
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the Acquire never reached its CAS")
	}
	other, ok := g.TryAcquire(1, 1)
	require.True(t, ok, "the limit was free")
	close(resume)
	// The first Acquire must now wait: the limit is taken.
	select {
	case r := <-done:
		t.Fatalf("the Acquire returned %+v beside a held permit of a limit of 1", r)
	case <-time.After(50 * time.Millisecond):
	}
	require.Equal(t, int64(1), g.Held())
	other.Release()
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, int64(1), r.held)
}
