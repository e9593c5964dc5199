package atomicsem_test

// What the conformance suite (semtest, run by conformance_test.go) cannot
// say of every implementation: MustNew, the zero Semaphore, Held, and the
// limit moves that take no lock. The black-box contract itself (New's arguments,
// the limits, Close, the order of grants, cancellation, WaitIdle, and what
// holds across every call) is semtest's.

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// MustNew is New for package-level semaphores: it panics, prefixed, on
// arguments New refuses.
func TestMustNewPanicsOnWhatNewRefuses(t *testing.T) {
	s := atomicsem.MustNew(2, 4)
	require.Equal(t, atomicsem.Stats{Available: 2, Limit: 2, Max: 4}, s.Stats())
	for _, args := range [][2]int64{{-1, 1}, {5, 4}, {0, atomicsem.MaxPermits + 1}} {
		require.PanicsWithError(t,
			"atomicsem: invalid number of permits: New("+itoa(args[0])+", "+itoa(args[1])+") needs 0 ≤ initial ≤ max ≤ 1073741823",
			func() { atomicsem.MustNew(args[0], args[1]) })
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// A Semaphore not made by New is not a semaphore of maximum zero: every
// method panics with a message that says what went wrong, on the fast
// paths too, and nothing hangs.
func TestZeroSemaphorePanicsOnFirstUse(t *testing.T) {
	const msg = "atomicsem: Semaphore used without New (the zero value is not usable)"
	calls := map[string]func(s *atomicsem.Semaphore){
		"Acquire":    func(s *atomicsem.Semaphore) { _, _ = s.Acquire(context.Background(), 1) },
		"Acquire0":   func(s *atomicsem.Semaphore) { _, _ = s.Acquire(context.Background(), 0) },
		"TryAcquire": func(s *atomicsem.Semaphore) { _, _ = s.TryAcquire(1) },
		"TryRelease": func(s *atomicsem.Semaphore) { s.TryRelease(1) },
		"Refill":     func(s *atomicsem.Semaphore) { s.Refill(1) },
		"SetLimit":   func(s *atomicsem.Semaphore) { _ = s.SetLimit(0) },
		"Close":      func(s *atomicsem.Semaphore) { s.Close() },
		"Stats":      func(s *atomicsem.Semaphore) { s.Stats() },
		"Held":       func(s *atomicsem.Semaphore) { s.Held() },
		"WaitIdle":   func(s *atomicsem.Semaphore) { _ = s.WaitIdle(context.Background()) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			var s atomicsem.Semaphore
			require.PanicsWithValue(t, msg, func() { call(&s) })
		})
	}
}

// Held reads the permits out from the word alone: it agrees with Stats
// through acquires, a lowered limit, a hand-off to a parked waiter and
// releases, and it does not wait for the queue lock.
func TestHeldCountsThePermitsTokensHold(t *testing.T) {
	s := mustNew(t, 3, 3)
	heldIs := func(want int64) {
		t.Helper()
		require.Equal(t, want, s.Held())
		require.Equal(t, want, s.Stats().Held)
	}
	heldIs(0)
	a, ok := s.TryAcquire(2)
	require.True(t, ok)
	heldIs(2)
	b, ok := s.TryAcquire(1)
	require.True(t, ok)
	heldIs(3)
	require.NoError(t, s.SetLimit(1))
	heldIs(3)
	require.NoError(t, s.SetLimit(3))
	got := make(chan *token.Token)
	go func() {
		tok, err := s.Acquire(context.Background(), 1)
		if err != nil {
			panic(err)
		}
		got <- &tok
	}()
	for s.Stats().Waiters == 0 {
		runtime.Gosched()
	}
	b.Release() // handed to the waiter: still held
	c := <-got
	heldIs(3)
	unlock := atomicsem.LockQueue(s)
	require.Equal(t, int64(3), s.Held())
	unlock()
	a.Release()
	c.Release()
	heldIs(0)
}

// Refill, like TryRelease, is one CAS on the word while no waiter is
// queued: it never waits for the queue lock.
func TestRefillWithNobodyQueuedTakesNoLock(t *testing.T) {
	s := mustNew(t, 0, 10)
	unlock := atomicsem.LockQueue(s)
	defer unlock()
	require.Equal(t, int64(10), s.Refill(10))
	require.NoError(t, s.SetLimit(5))
	require.True(t, s.TryRelease(1))
}
