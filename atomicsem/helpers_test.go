package atomicsem_test

// Helpers shared by the package's tests. Those that only the hooks build
// uses (stopping a goroutine at a hook site) are in helpers_hooks_test.go.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// Making semaphores and taking permits.

// eachMode runs f once per fairness mode, for behaviour that the mode must
// not change.
func eachMode(t *testing.T, f func(t *testing.T, opts []atomicsem.Option)) {
	t.Helper()
	modes := []struct {
		name string
		opts []atomicsem.Option
	}{
		{"mode=fifo", nil},
		{"mode=barging", []atomicsem.Option{atomicsem.WithBarging()}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { f(t, m.opts) })
	}
}

// mustNew is New for arguments the test knows to be valid.
func mustNew(t testing.TB, initial, max int64, opts ...atomicsem.Option) *atomicsem.Semaphore {
	t.Helper()
	s, err := atomicsem.New(initial, max, opts...)
	require.NoError(t, err)
	return s
}

// mustTake takes n permits that the test knows to be free.
func mustTake(t testing.TB, s *atomicsem.Semaphore, n int64) *token.Token {
	t.Helper()
	tok, ok := s.TryAcquire(n)
	require.True(t, ok, "TryAcquire(%d) with %+v", n, s.Stats())
	return &tok
}

// Acquires in goroutines of their own.

// pendingAcquire is an Acquire running in its own goroutine.
type pendingAcquire struct {
	done chan struct{} // closed when Acquire has returned
	tok  token.Token   // valid once done is closed
	err  error         // valid once done is closed
}

// goAcquire starts Acquire(ctx, n) in a new goroutine.
func goAcquire(ctx context.Context, s *atomicsem.Semaphore, n int64) *pendingAcquire {
	p := &pendingAcquire{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.tok, p.err = s.Acquire(ctx, n)
	}()
	return p
}

// returned reports whether the Acquire has returned, without blocking.
func (p *pendingAcquire) returned() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// returnsWithin reports whether the Acquire returns within d of real time.
func (p *pendingAcquire) returnsWithin(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// waitFor waits for the Acquire to return, failing the test after a
// generous real-time limit instead of hanging the run.
func (p *pendingAcquire) waitFor(t testing.TB) {
	t.Helper()
	if !p.returnsWithin(10 * time.Second) {
		t.Fatal("Acquire did not return")
	}
}

// firstReturned waits for one of the pending acquires to return and gives
// its index, failing the test after a generous real-time limit. The others
// are checked at the same instant, so a waiter served out of order is named
// rather than waited for in vain.
func firstReturned(t testing.TB, pending []*pendingAcquire) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for i, p := range pending {
			if p.returned() {
				return i
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no waiter returned")
		}
		runtime.Gosched()
	}
}

// awaitWaiters spins until at least n Acquire calls are parked on s, for a
// test that races real goroutines and so cannot use synctest.Wait (inside a
// bubble, use park). It yields rather than sleeps and allocates nothing, so
// that it may run beside an allocation count, and it may run on any
// goroutine: if the waiters have not parked within a generous real-time
// limit, it panics with the counts rather than hang the run.
func awaitWaiters(s *atomicsem.Semaphore, n int) {
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Waiters < n {
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("awaitWaiters: %d Acquire calls parked after 10s, want %d", s.Stats().Waiters, n))
		}
		runtime.Gosched()
	}
}

// grantedByHandOff takes n of s's permits, parks an Acquire of n behind
// them, and releases the holder, so that the parked Acquire is granted its
// permits by hand-off; it returns that Acquire, returned. s must be in FIFO
// mode, with exactly n permits free and nobody queued.
func grantedByHandOff(t *testing.T, s *atomicsem.Semaphore, n int64) *pendingAcquire {
	t.Helper()
	holder := mustTake(t, s, n)
	p := goAcquire(t.Context(), s, n)
	awaitWaiters(s, 1)
	holder.Release()
	<-p.done
	require.NoError(t, p.err)
	return p
}

// churn acquires, holds briefly, and releases or forgets, with random
// requests of 1 to 5 permits and random deadlines, until ctx is done.
func churn(ctx context.Context, s *atomicsem.Semaphore, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	for ctx.Err() == nil {
		n := 1 + rng.Int64N(5)
		actx, cancel := context.WithTimeout(ctx, time.Duration(rng.IntN(200))*time.Microsecond)
		tok, err := s.Acquire(actx, n)
		cancel()
		if err != nil {
			continue
		}
		time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
		if rng.IntN(8) == 0 {
			tok.Forget()
			s.TryRelease(n)
		} else {
			tok.Release()
		}
	}
}

// Acquires in a testing/synctest bubble, where synctest.Wait returns only
// once every other goroutine of the bubble is durably blocked, which for a
// parked Acquire means parked in its select: after each step the set of
// waiters that have returned is exact, not a matter of timing.

// park starts Acquire(ctx, n) and waits until it is parked, so that waiters
// started one after the other queue in that order. It must run in a bubble.
func park(t *testing.T, s *atomicsem.Semaphore, ctx context.Context, n int64) *pendingAcquire {
	t.Helper()
	before := s.Stats().Waiters
	p := goAcquire(ctx, s, n)
	synctest.Wait()
	require.False(t, p.returned(), "Acquire(%d) should have parked", n)
	require.Equal(t, before+1, s.Stats().Waiters, "Acquire(%d) should be queued", n)
	return p
}

// requireReturned checks exactly which of ps have returned, by index.
func requireReturned(t *testing.T, ps []*pendingAcquire, want ...int) {
	t.Helper()
	var got []int
	for i, p := range ps {
		if p.returned() {
			got = append(got, i)
		}
	}
	require.Equal(t, want, got, "indexes of the waiters that have returned")
}

// requireGranted checks that p returned a token for n permits; msgAndArgs
// say why it should have, for the failure report.
func requireGranted(t *testing.T, p *pendingAcquire, n int64, msgAndArgs ...any) {
	t.Helper()
	require.True(t, p.returned(), msgAndArgs...)
	require.NoError(t, p.err)
	require.Equal(t, n, p.tok.Permits())
}

// WaitIdle in a goroutine of its own.

// goWaitIdle starts WaitIdle(ctx) in a goroutine and returns a channel that
// receives its result.
func goWaitIdle(ctx context.Context, s *atomicsem.Semaphore) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.WaitIdle(ctx) }()
	return done
}

// requireWaitIdleBlocked checks, in a bubble, that the WaitIdle behind done
// is still waiting.
func requireWaitIdleBlocked(t *testing.T, done <-chan error) {
	t.Helper()
	synctest.Wait()
	select {
	case err := <-done:
		t.Fatalf("WaitIdle returned %v while permits are held", err)
	default:
	}
}

// requireWaitIdleReturnedNil checks, in a bubble, that the WaitIdle behind
// done has returned nil.
func requireWaitIdleReturnedNil(t *testing.T, done <-chan error) {
	t.Helper()
	synctest.Wait()
	select {
	case err := <-done:
		require.NoError(t, err)
	default:
		t.Fatal("WaitIdle still waits with no permit held")
	}
}

// The semaphore's internal state.

// requireQueueFlags checks that the word's queue and idle flags agree with
// the queue and the WaitIdle callers (atomicsem.QueueFlagsError).
func requireQueueFlags(t *testing.T, s *atomicsem.Semaphore) {
	t.Helper()
	require.Empty(t, atomicsem.QueueFlagsError(s), "%+v", s.Stats())
}

// requireServesNormally checks that, after a misuse, s is as it should be
// and serves parked acquirers in order: the queue, the free list of waiter
// records and the word are all intact.
func requireServesNormally(t *testing.T, s *atomicsem.Semaphore, want atomicsem.Stats) {
	t.Helper()
	require.Equal(t, want, s.Stats())
	requireQueueFlags(t, s)
	require.Empty(t, atomicsem.FreeListError(s))
	synctest.Test(t, func(t *testing.T) {
		var held []*token.Token
		for range want.Available {
			held = append(held, mustTake(t, s, 1))
		}
		var parked []*pendingAcquire
		for range 3 {
			parked = append(parked, park(t, s, t.Context(), 1))
		}
		for i, p := range parked {
			held[0].Release()
			synctest.Wait()
			requireGranted(t, p, 1)
			require.False(t, i+1 < len(parked) && parked[i+1].returned(), "one grant per release")
			held[0] = &p.tok
		}
		for _, tok := range held {
			tok.Release()
		}
	})
	require.Equal(t, want, s.Stats())
	require.Empty(t, atomicsem.FreeListError(s))
}

// Panics.

// panicOf runs f and returns what it panicked with, formatted, or "".
func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// requireMisusePanic checks that msg is a misuse panic in the semaphore's
// voice that names copying and concurrent ends as the likely causes.
func requireMisusePanic(t *testing.T, msg string) {
	t.Helper()
	if raceEnabled && strings.HasPrefix(msg, "token: ") {
		// The race build's token tracking catches a copy before it
		// reaches the semaphore.
		require.Contains(t, msg, "called on a copy of a token")
		return
	}
	require.True(t, strings.HasPrefix(msg, "atomicsem: "), "panic %q lacks the package prefix", msg)
	require.Contains(t, msg, "copied")
	require.Contains(t, msg, "two goroutines at once")
}

// copyToken copies a token the way a caller who ignores go vet's copylocks
// report would, without the report: through reflection.
func copyToken(src *token.Token) *token.Token {
	dst := new(token.Token)
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
	return dst
}

// Allocation counts.

// skipUnderRace skips an allocation check in a -race build, whose
// instrumentation allocates on its own.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
}

// worker runs f in its own goroutine once per kick, so that a measured
// function can have work done for it without starting a goroutine, which
// allocates.
type worker struct {
	kicks chan struct{}
	done  chan struct{}
}

// startWorker starts the worker's goroutine; stop ends it.
func startWorker(f func()) *worker {
	w := &worker{kicks: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for range w.kicks {
			f()
		}
	}()
	return w
}

// kick starts one run of f; it returns once the worker has received it.
func (w *worker) kick() { w.kicks <- struct{}{} }

// stop ends the worker and waits for it.
func (w *worker) stop() {
	close(w.kicks)
	<-w.done
}
