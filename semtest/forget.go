package semtest

import (
	"context"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/semcontract"
)

// forgetChecks are TryForget's, for a semaphore that is a Forgetter.
var forgetChecks = []check{
	{name: "TryForgetRetiresAvailablePermits", f: tryForgetRetiresAvailablePermits},
	{name: "TryForgetFailsAfterClose", f: tryForgetFailsAfterClose},
	{name: "TryForgetDoesNotOvertakeAnEligibleWaiter", f: tryForgetDoesNotOvertakeAnEligibleWaiter, fifo: true},
	{name: "TryForgetBesideAWaiterAboveTheLimit", f: tryForgetBesideAWaiterAboveTheLimit},
}

// forgetter returns s as a Forgetter, or skips the check.
func (e *env) forgetter(s Semaphore) Forgetter {
	e.t.Helper()
	f, ok := s.(Forgetter)
	if !ok {
		e.t.Skipf("semtest: %T has no TryForget", s)
	}
	return f
}

// TryForget lowers the available count and the limit together, holds
// nothing, and reports the limit it left; a refusal changes nothing. (For
// a count out of range the limit it reports is not checked: a semaphore
// behind a server refuses such a count without asking.)
func tryForgetRetiresAvailablePermits(e *env) {
	tests := []struct {
		name      string
		n         int64
		wantOK    bool
		wantLimit int64
		want      Stats
	}{
		{"some", 3, true, 7, Stats{Available: 5, Held: 2, Limit: 7, Max: 16}},
		{"all available", 8, true, 2, Stats{Available: 0, Held: 2, Limit: 2, Max: 16}},
		{"more than available", 9, false, 10, Stats{Available: 8, Held: 2, Limit: 10, Max: 16}},
		{"nothing reads the limit", 0, true, 10, Stats{Available: 8, Held: 2, Limit: 10, Max: 16}},
		{"negative", -1, false, 10, Stats{Available: 8, Held: 2, Limit: 10, Max: 16}},
		{"above MaxPermits", semcontract.MaxPermits + 1, false, 10, Stats{Available: 8, Held: 2, Limit: 10, Max: 16}},
	}
	for _, tt := range tests {
		s := e.new(10, 16)
		f := e.forgetter(s)
		tok := e.mustTake(s, 2)
		limit, ok := f.TryForget(tt.n)
		require.Equal(e.t, tt.wantOK, ok, tt.name)
		if ok || tt.n >= 0 && tt.n <= semcontract.MaxPermits {
			require.Equal(e.t, tt.wantLimit, limit, tt.name)
		}
		require.Equal(e.t, tt.want, s.Stats(), tt.name)
		tok.Release()
		require.Equal(e.t, Stats{Available: tt.want.Limit, Limit: tt.want.Limit, Max: 16}, s.Stats(),
			"%s: held permits come back in full", tt.name)
	}
}

// After Close, TryForget fails for any request, nothing included.
func tryForgetFailsAfterClose(e *env) {
	s := e.new(4, 4)
	f := e.forgetter(s)
	s.Close()
	for _, n := range []int64{0, 1, 4} {
		limit, ok := f.TryForget(n)
		require.False(e.t, ok, "TryForget(%d)", n)
		require.Equal(e.t, int64(4), limit)
	}
	require.Equal(e.t, Stats{Available: 4, Held: 0, Limit: 4, Max: 4, Closed: true}, s.Stats())
}

// TryForget never takes permits that a parked waiter under the limit is
// owed, even when enough are free for both.
func tryForgetDoesNotOvertakeAnEligibleWaiter(e *env) {
	s := e.new(4, 8)
	f := e.forgetter(s)
	first := e.mustTake(s, 3)
	p := e.park(s, e.background(), 2) // 1 free: it parks, under the limit
	_, ok := f.TryForget(1)
	require.False(e.t, ok, "TryForget overtook a parked waiter")
	first.Release()
	e.quiesce()
	e.requireGranted(p, 2)
	p.tok.Release()
	_, ok = f.TryForget(1)
	require.True(e.t, ok)
	require.Equal(e.t, Stats{Available: 3, Held: 0, Limit: 3, Max: 8}, s.Stats())
}

// A waiter that asks for more than the limit holds nobody back, so
// TryForget may take free permits beside it; raised again, the limit
// serves the waiter.
func tryForgetBesideAWaiterAboveTheLimit(e *env) {
	s := e.new(4, 8)
	f := e.forgetter(s)
	ctx, cancel := context.WithCancel(e.background())
	defer cancel()
	p := e.park(s, ctx, 6) // above the limit of 4
	limit, ok := f.TryForget(3)
	require.True(e.t, ok)
	require.Equal(e.t, int64(1), limit)
	require.Equal(e.t, Stats{Available: 1, Held: 0, Limit: 1, Max: 8, Waiters: 1}, s.Stats())
	require.True(e.t, s.TryRelease(5), "raise the limit to 6: the waiter fits")
	e.quiesce()
	e.requireGranted(p, 6)
	p.tok.Forget()
	require.Equal(e.t, Stats{Available: 0, Held: 0, Limit: 0, Max: 8}, s.Stats())
}
