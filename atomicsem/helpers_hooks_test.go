//go:build atomicsem_hooks

package atomicsem_test

// Helpers for the hooks build: they stop a goroutine at a hook site inside
// the semaphore (scenario_hooks_test.go), or perturb the token races
// (race_test.go).

import (
	"bytes"
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	"sync/atomic"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/internal/hook"
	"github.com/atomicsem/atomicsem/token"
)

// In the hooks build, the token races yield at half the hook sites, chosen
// at random, so that a goroutine often loses the processor between a load of
// the state word and its CAS, or between being woken and returning.
func init() {
	installRaceHook = func() func() {
		return hook.Set(func(hook.Site) {
			if rand.IntN(2) == 0 {
				runtime.Gosched()
			}
		})
	}
}

// stopper blocks the goroutines that reach chosen hook sites: each stop is
// announced on stopped, one at a time, and lasts until the test resumes that
// goroutine. Its channels are made in the bubble, so a stopped goroutine is
// durably blocked.
type stopper struct {
	stopped chan stop
	held    []stop // the stops waitStop returned and not yet resumed, oldest first
}

type stop struct {
	site   hook.Site
	goid   uint64 // the stopped goroutine (see goid)
	resume chan struct{}
}

// installStopper installs a hook that stops the goroutine at a site when
// stopAt(site) says so, and removes it when the test ends. stopAt is called
// by whichever goroutine reaches a site and must be safe for that.
func installStopper(t *testing.T, stopAt func(hook.Site) bool) *stopper {
	st := &stopper{stopped: make(chan stop)}
	restore := hook.Set(func(site hook.Site) {
		if stopAt(site) {
			resume := make(chan struct{})
			st.stopped <- stop{site, goid(), resume}
			<-resume
		}
	})
	t.Cleanup(restore)
	return st
}

// waitStop returns once a goroutine is stopped, at the site it names.
func (st *stopper) waitStop() hook.Site {
	s := <-st.stopped
	st.held = append(st.held, s)
	return s.site
}

// waitStopUnless is waitStop, unless done is closed first: then it reports
// false, for a goroutine that finished without reaching the site.
func (st *stopper) waitStopUnless(done <-chan struct{}) (hook.Site, bool) {
	select {
	case s := <-st.stopped:
		st.held = append(st.held, s)
		return s.site, true
	case <-done:
		return 0, false
	}
}

// resume lets the goroutine stopped longest go on.
func (st *stopper) resume() { st.resumeAt(0) }

// resumeAt lets the i-th of the stopped goroutines go on, counting from the
// one stopped longest.
func (st *stopper) resumeAt(i int) {
	close(st.held[i].resume)
	st.held = slices.Delete(st.held, i, i+1)
}

// resumeWaiter lets the stopped goroutine of p go on; it fails the test if
// that goroutine is not stopped.
func (st *stopper) resumeWaiter(t *testing.T, p *notedAcquire) {
	t.Helper()
	for i, s := range st.held {
		if s.goid == p.goid {
			st.resumeAt(i)
			return
		}
	}
	t.Fatalf("goroutine %d is not stopped", p.goid)
}

// notedAcquire is a pendingAcquire whose goroutine's id is known.
type notedAcquire struct {
	*pendingAcquire
	goid uint64
}

// parkNoted is park for a waiter that the test must tell apart from
// others stopped at a hook site (see resumeWaiter): its Acquire runs in a
// goroutine whose id it notes.
func parkNoted(t *testing.T, s *atomicsem.Semaphore, ctx context.Context, n int64) *notedAcquire {
	t.Helper()
	before := s.Stats().Waiters
	p := &notedAcquire{pendingAcquire: &pendingAcquire{done: make(chan struct{})}}
	noted := make(chan struct{})
	go func() {
		defer close(p.done)
		p.goid = goid()
		close(noted)
		p.tok, p.err = s.Acquire(ctx, n)
	}()
	<-noted
	synctest.Wait()
	require.False(t, p.returned(), "Acquire(%d) should have parked", n)
	require.Equal(t, before+1, s.Stats().Waiters, "Acquire(%d) should be queued", n)
	return p
}

// goid returns the calling goroutine's id, read from the first line of its
// stack trace ("goroutine 42 [running]:"): a stopper notes it, so that a
// test can tell apart goroutines stopped at the same site.
func goid() uint64 {
	var buf [64]byte
	line := buf[:runtime.Stack(buf[:], false)]
	line = bytes.TrimPrefix(line, []byte("goroutine "))
	id, _, _ := bytes.Cut(line, []byte(" "))
	n, err := strconv.ParseUint(string(id), 10, 64)
	if err != nil {
		panic("goid: cannot read the goroutine's id from " + string(buf[:]))
	}
	return n
}

// stopAtDispatchCAS installs a stopper that stops the first n word changes
// (BeforeCAS) from the moment a dispatch begins, whichever goroutine makes
// them.
func stopAtDispatchCAS(t *testing.T, n int32) *stopper {
	var dispatching atomic.Bool
	var stops atomic.Int32
	return installStopper(t, func(site hook.Site) bool {
		switch site {
		case hook.BeforeDispatch:
			dispatching.Store(true)
		case hook.BeforeCAS:
			return dispatching.Load() && stops.Add(1) <= n
		}
		return false
	})
}

// stopWakeUps stops every parked Acquire as it wakes (at AfterWake) until
// the returned function is called.
func stopWakeUps(t *testing.T) (st *stopper, stopNoMore func()) {
	var stopping atomic.Bool
	stopping.Store(true)
	st = installStopper(t, func(site hook.Site) bool {
		return site == hook.AfterWake && stopping.Load()
	})
	return st, func() { stopping.Store(false) }
}

// stopFirstPark installs a stopper that stops the first goroutine to reach
// BeforePark (queued, not yet waiting), and no other.
func stopFirstPark(t *testing.T) *stopper {
	var stopped atomic.Bool
	return installStopper(t, func(site hook.Site) bool {
		return site == hook.BeforePark && stopped.CompareAndSwap(false, true)
	})
}

// stopWakeThenRequeue installs a stopper for a barging waiter that loses
// its race: it stops every waiter woken (AfterWake) until one has queued
// again, and that one once more at BeforePark, queued and not yet waiting.
func stopWakeThenRequeue(t *testing.T) *stopper {
	var parks atomic.Int32
	return installStopper(t, func(site hook.Site) bool {
		switch site {
		case hook.AfterWake:
			return parks.Load() == 0
		case hook.BeforePark:
			return parks.Add(1) == 1
		}
		return false
	})
}

// goRelease releases tok in a goroutine of its own, for a release that the
// test stops at a hook site, and returns a channel closed once Release has
// returned.
func goRelease(tok *token.Token) <-chan struct{} {
	released := make(chan struct{})
	go func() {
		defer close(released)
		tok.Release()
	}()
	return released
}
