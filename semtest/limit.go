package semtest

import (
	"context"
	"math"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/semcontract"
	"github.com/atomicsem/atomicsem/token"
)

// limitChecks are the moves of the limit: TryRelease and Refill against
// the ceiling, Forget, SetLimit into debt and back, and Close.
var limitChecks = []check{
	{name: "MaxPermitsHoldsABillionBytes", f: maxPermitsHoldsABillionBytes},
	{name: "BoundariesAtMaxPermits", f: boundariesAtMaxPermits},
	{name: "BoundariesAtASmallerMaximum", f: boundariesAtASmallerMaximum},
	{name: "TryReleaseCountsHeldPermitsAgainstMax", f: tryReleaseCountsHeldPermitsAgainstMax},
	{name: "TryReleaseNeverPassesTheMaximum", f: tryReleaseNeverPassesTheMaximum},
	{name: "RefillAddsWhatFits", f: refillAddsWhatFits},
	{name: "RefillServesWaiters", f: refillServesWaiters},
	{name: "ForgetLowersLimit", f: forgetLowersLimit},
	{name: "SetLimitBelowHeldThenRaise", f: setLimitBelowHeldThenRaise},
	{name: "UnthrottleAfterDebtWakesWaitersAtOnce", f: unthrottleAfterDebtWakesWaitersAtOnce},
	{name: "CloseFailsParkedWaitersAndLaterCalls", f: closeFailsParkedWaitersAndLaterCalls},
}

// MaxPermits is 2^30 − 1, so that a budget of a billion bytes is exact.
func maxPermitsHoldsABillionBytes(e *env) {
	require.Equal(e.t, int64(1<<30-1), int64(semcontract.MaxPermits))
	s := e.new(1e9, 1e9)
	tok := e.mustTake(s, 512<<20)
	require.Equal(e.t, Stats{Available: 1e9 - 512<<20, Held: 512 << 20, Limit: 1e9, Max: 1e9}, s.Stats())
	tok.Release()
}

// Every count the API takes, at MaxPermits − 1, MaxPermits and
// MaxPermits + 1: nothing wraps, and what is out of range gets the
// documented error (or false, or 0) with nothing changed.
func boundariesAtMaxPermits(e *env) {
	const top = semcontract.MaxPermits
	s := e.new(0, top)

	// Adding permits: up to exactly MaxPermits, never past it.
	require.False(e.t, s.TryRelease(top+1))
	require.True(e.t, s.TryRelease(top-1))
	require.False(e.t, s.TryRelease(2), "limit would be MaxPermits + 1")
	require.Equal(e.t, int64(1), s.Refill(top+1), "Refill adds only what fits")
	require.Zero(e.t, s.Refill(top))
	require.Zero(e.t, s.Refill(math.MaxInt64))
	require.False(e.t, s.TryRelease(1))
	require.Equal(e.t, Stats{Available: top, Limit: top, Max: top}, s.Stats())

	// Requests.
	_, err := s.Acquire(e.background(), top+1)
	require.ErrorIs(e.t, err, semcontract.ErrInvalidPermits)
	_, ok := s.TryAcquire(top + 1)
	require.False(e.t, ok)
	one, err := s.Acquire(e.background(), 1)
	require.NoError(e.t, err)
	_, ok = s.TryAcquire(top)
	require.False(e.t, ok, "only MaxPermits − 1 are free")
	rest, ok := s.TryAcquire(top - 1)
	require.True(e.t, ok)
	require.Equal(e.t, Stats{Available: 0, Held: top, Limit: top, Max: top}, s.Stats())

	// Limits, with everything held: the deepest debt, and back.
	require.ErrorIs(e.t, s.SetLimit(top+1), semcontract.ErrExceedsMax)
	require.NoError(e.t, s.SetLimit(top-1))
	require.Equal(e.t, Stats{Available: -1, Held: top, Limit: top - 1, Max: top}, s.Stats())
	require.NoError(e.t, s.SetLimit(0))
	require.Equal(e.t, Stats{Available: -top, Held: top, Limit: 0, Max: top}, s.Stats())
	require.NoError(e.t, s.SetLimit(top))
	require.Equal(e.t, Stats{Available: 0, Held: top, Limit: top, Max: top}, s.Stats())

	// Returning and forgetting the widest tokens.
	rest.Forget()
	require.Equal(e.t, Stats{Available: 0, Held: 1, Limit: 1, Max: top}, s.Stats())
	one.Release()
	require.Equal(e.t, Stats{Available: 1, Held: 0, Limit: 1, Max: top}, s.Stats())
	require.Equal(e.t, int64(top-1), s.Refill(math.MaxInt64))
	all, err := s.Acquire(e.background(), top)
	require.NoError(e.t, err)
	all.Release()
	require.Equal(e.t, Stats{Available: top, Limit: top, Max: top}, s.Stats())
}

// A semaphore whose maximum is below MaxPermits refuses what is above its
// maximum, at the edge, with ErrExceedsMax.
func boundariesAtASmallerMaximum(e *env) {
	const max = semcontract.MaxPermits - 1
	s := e.new(max, max)
	_, err := s.Acquire(e.background(), max+1)
	require.ErrorIs(e.t, err, semcontract.ErrExceedsMax)
	_, ok := s.TryAcquire(max + 1)
	require.False(e.t, ok)
	require.ErrorIs(e.t, s.SetLimit(max+1), semcontract.ErrExceedsMax)
	require.False(e.t, s.TryRelease(1))
	require.Zero(e.t, s.Refill(1))
	tok, err := s.Acquire(e.background(), max)
	require.NoError(e.t, err)
	tok.Release()
	require.Equal(e.t, Stats{Available: max, Limit: max, Max: max}, s.Stats())
}

func tryReleaseCountsHeldPermitsAgainstMax(e *env) {
	s := e.new(5, 5)
	held := e.mustTake(s, 3)
	before := s.Stats()
	require.False(e.t, s.TryRelease(1), "limit is at max with 3 permits out: no room for more")
	require.Equal(e.t, before, s.Stats())
	held.Release()
	require.False(e.t, s.TryRelease(1), "releasing a token must not make room above max")

	require.NoError(e.t, s.SetLimit(2))
	held = e.mustTake(s, 2)
	require.True(e.t, s.TryRelease(3))
	require.Equal(e.t, counts{Available: 3, Held: 2, Limit: 5}, countsOf(s))
	require.False(e.t, s.TryRelease(1))
	held.Release()
	require.Equal(e.t, counts{Available: 5, Held: 0, Limit: 5}, countsOf(s))
}

// Bug shape: over-release past the ceiling. TryRelease that checks only the
// available count, not the limit with the held permits, lets the limit pass
// the maximum once tokens come back.
func tryReleaseNeverPassesTheMaximum(e *env) {
	type try struct {
		n  int64
		ok bool
	}
	tests := []struct {
		name         string
		initial, max int64
		take         []int64
		limit        int64 // SetLimit before the tries; -1 for none
		tries        []try
		want         Stats
	}{
		{
			name: "at max with tokens out", initial: 4, max: 4, take: []int64{2}, limit: -1,
			tries: []try{{1, false}},
			want:  Stats{Available: 2, Held: 2, Limit: 4, Max: 4},
		},
		{
			name: "held permits count against max", initial: 2, max: 4, take: []int64{2}, limit: -1,
			tries: []try{{3, false}, {2, true}, {1, false}},
			want:  Stats{Available: 2, Held: 2, Limit: 4, Max: 4},
		},
		{
			name: "in debt", initial: 4, max: 4, take: []int64{1, 2}, limit: 1,
			tries: []try{{4, false}, {3, true}, {1, false}},
			want:  Stats{Available: 1, Held: 3, Limit: 4, Max: 4},
		},
		{
			name: "not a positive count", initial: 1, max: 4, limit: -1,
			tries: []try{{0, false}, {-1, false}},
			want:  Stats{Available: 1, Held: 0, Limit: 1, Max: 4},
		},
	}
	for _, tt := range tests {
		s := e.new(tt.initial, tt.max)
		var toks []*token.Token
		for _, n := range tt.take {
			toks = append(toks, e.mustTake(s, n))
		}
		if tt.limit >= 0 {
			require.NoError(e.t, s.SetLimit(tt.limit))
		}
		for _, try := range tt.tries {
			require.Equal(e.t, try.ok, s.TryRelease(try.n), "%s: TryRelease(%d) with %+v", tt.name, try.n, s.Stats())
		}
		require.Equal(e.t, tt.want, s.Stats(), tt.name)

		for _, tok := range toks {
			tok.Release()
		}
		got := s.Stats()
		require.Equal(e.t, got.Limit, got.Available, tt.name)
		require.LessOrEqual(e.t, got.Limit, got.Max, tt.name)
	}
}

// Refill adds what fits under the ceiling, counting held permits, and
// nothing when nothing fits, for a count that is not positive, or once
// closed.
func refillAddsWhatFits(e *env) {
	tests := []struct {
		name         string
		initial, max int64
		take         int64 // held while refilling
		limit        int64 // SetLimit before refilling; -1 for none
		n            int64
		added        int64
		want         counts
	}{
		{"fills up to max", 2, 5, 0, -1, 10, 3, counts{Available: 5, Held: 0, Limit: 5}},
		{"adds all that fits", 2, 5, 0, -1, 2, 2, counts{Available: 4, Held: 0, Limit: 4}},
		{"held permits count against max", 4, 4, 2, 1, 5, 3, counts{Available: 2, Held: 2, Limit: 4}},
		{"at max adds nothing", 3, 3, 1, -1, 1, 0, counts{Available: 2, Held: 1, Limit: 3}},
		{"zero adds nothing", 1, 3, 0, -1, 0, 0, counts{Available: 1, Held: 0, Limit: 1}},
		{"negative adds nothing", 1, 3, 0, -1, -1, 0, counts{Available: 1, Held: 0, Limit: 1}},
	}
	for _, tt := range tests {
		s := e.new(tt.initial, tt.max)
		var held *token.Token
		if tt.take > 0 {
			held = e.mustTake(s, tt.take)
		}
		if tt.limit >= 0 {
			require.NoError(e.t, s.SetLimit(tt.limit))
		}
		require.Equal(e.t, tt.added, s.Refill(tt.n), "%s: Refill(%d)", tt.name, tt.n)
		require.Equal(e.t, tt.want, countsOf(s), tt.name)
		if held != nil {
			held.Release()
		}
	}

	s := e.new(1, 3)
	s.Close()
	require.Zero(e.t, s.Refill(1), "Refill after Close")
	require.Equal(e.t, Stats{Available: 1, Limit: 1, Max: 3, Closed: true}, s.Stats())
}

// Permits added by Refill serve the waiters they fit, in order.
func refillServesWaiters(e *env) {
	s := e.new(0, 4)
	ps := []*pending{e.park(s, e.background(), 2), e.park(s, e.background(), 1)}
	require.Equal(e.t, int64(2), s.Refill(2))
	e.quiesce()
	e.requireReturned(ps, 0)
	e.requireGranted(ps[0], 2)
	require.Equal(e.t, int64(2), s.Refill(5))
	e.quiesce()
	e.requireReturned(ps, 0, 1)
	e.requireGranted(ps[1], 1)
	require.Equal(e.t, Stats{Available: 1, Held: 3, Limit: 4, Max: 4}, s.Stats())
	ps[0].tok.Release()
	ps[1].tok.Release()
}

func forgetLowersLimit(e *env) {
	tests := []struct {
		name   string
		holds  []int64  // tokens taken from a semaphore of 5, at most 5
		limit  int64    // then the limit is set to this
		forget []int    // then these tokens are forgotten, in order
		after  []counts // Stats after each Forget
	}{
		{"one of two", []int64{2, 1}, 5, []int{0},
			[]counts{{Available: 2, Held: 1, Limit: 3}}},
		{"all", []int64{2, 3}, 5, []int{1, 0},
			[]counts{{Available: 0, Held: 2, Limit: 2}, {Available: 0, Held: 0, Limit: 0}}},
		{"in debt after SetLimit(0)", []int64{4}, 0, []int{0},
			[]counts{{Available: 0, Held: 0, Limit: 0}}},
		{"in debt, limit stops at zero", []int64{2, 2}, 3, []int{0, 1},
			[]counts{{Available: -1, Held: 2, Limit: 1}, {Available: 0, Held: 0, Limit: 0}}},
	}
	for _, tt := range tests {
		s := e.new(5, 5)
		var toks []*token.Token
		for _, n := range tt.holds {
			toks = append(toks, e.mustTake(s, n))
		}
		require.NoError(e.t, s.SetLimit(tt.limit))
		for i, idx := range tt.forget {
			toks[idx].Forget()
			require.Equal(e.t, tt.after[i], countsOf(s), "%s: after forgetting token %d", tt.name, idx)
		}
		for _, tok := range toks {
			if tok.Permits() > 0 {
				tok.Release()
			}
		}
		c := countsOf(s)
		require.Zero(e.t, c.Held, tt.name)
		require.Equal(e.t, c.Limit, c.Available, tt.name)
		// The forgotten permits can be put back, up to max.
		if c.Limit < 5 {
			require.True(e.t, s.TryRelease(5-c.Limit), tt.name)
		}
		require.Equal(e.t, counts{Available: 5, Held: 0, Limit: 5}, countsOf(s), tt.name)
	}
}

func setLimitBelowHeldThenRaise(e *env) {
	s := e.new(4, 8)
	a, b := e.mustTake(s, 2), e.mustTake(s, 1)

	// Throttle below what is held: no token is revoked, the difference
	// shows as debt.
	require.NoError(e.t, s.SetLimit(1))
	require.Equal(e.t, counts{Available: -2, Held: 3, Limit: 1}, countsOf(s))
	_, ok := s.TryAcquire(1)
	require.False(e.t, ok, "no permit may be taken while in debt")
	waiter := e.park(s, e.background(), 1)

	a.Release()
	e.quiesce()
	require.Equal(e.t, counts{Available: 0, Held: 1, Limit: 1}, countsOf(s))
	require.False(e.t, waiter.returned(), "paying the debt off leaves nothing to grant")

	// Unthrottle: the waiter is served.
	require.NoError(e.t, s.SetLimit(6))
	e.quiesce()
	e.requireGranted(waiter, 1)
	require.Equal(e.t, Stats{Available: 4, Held: 2, Limit: 6, Max: 8}, s.Stats())

	waiter.tok.Release()
	b.Release()
	require.Equal(e.t, counts{Available: 6, Held: 0, Limit: 6}, countsOf(s))
}

// Bug shape: a limit lowered below what tokens hold either revokes them,
// loses the debt (Available clamped at zero, so the semaphore over-admits
// later), or forgets to wake the waiters when the limit comes back.
func unthrottleAfterDebtWakesWaitersAtOnce(e *env) {
	s := e.new(4, 4)
	t1, t2 := e.mustTake(s, 1), e.mustTake(s, 1)

	require.NoError(e.t, s.SetLimit(0))
	require.Equal(e.t, Stats{Available: -2, Held: 2, Limit: 0, Max: 4}, s.Stats())
	ps := []*pending{e.park(s, e.background(), 1), e.park(s, e.background(), 1)}

	t1.Release()
	e.quiesce()
	e.requireReturned(ps)
	require.Equal(e.t, Stats{Available: -1, Held: 1, Limit: 0, Max: 4, Waiters: 2}, s.Stats())

	require.NoError(e.t, s.SetLimit(4))
	e.quiesce()
	e.requireReturned(ps, 0, 1)
	e.requireGranted(ps[0], 1)
	e.requireGranted(ps[1], 1)
	require.Equal(e.t, Stats{Available: 1, Held: 3, Limit: 4, Max: 4}, s.Stats())

	t2.Release()
	ps[0].tok.Release()
	ps[1].tok.Release()
	require.Equal(e.t, Stats{Available: 4, Held: 0, Limit: 4, Max: 4}, s.Stats())
}

// Bug shape: Close that leaves a waiter parked, grants it, or loses track of
// the permits that tokens still hold.
func closeFailsParkedWaitersAndLaterCalls(e *env) {
	s := e.new(2, 6)
	a := e.mustTake(s, 1)
	b := e.mustTake(s, 1)
	ctx, cancel := context.WithCancel(e.background())
	defer cancel()
	parked := []*pending{
		e.park(s, e.background(), 1),
		e.park(s, ctx, 2),
		e.park(s, e.background(), 3), // above the limit, within the maximum
	}
	require.Equal(e.t, 3, s.Stats().Waiters)

	s.Close()
	e.quiesce()
	for _, p := range parked {
		require.True(e.t, p.returned(), "Close must wake every parked waiter")
		require.ErrorIs(e.t, p.err, semcontract.ErrClosed)
		require.Zero(e.t, p.tok.Permits())
	}
	want := Stats{Available: 0, Held: 2, Limit: 2, Max: 6, Waiters: 0, Closed: true}
	require.Equal(e.t, want, s.Stats())

	// Every call that would change the count fails, and changes nothing.
	_, err := s.Acquire(e.background(), 1)
	require.ErrorIs(e.t, err, semcontract.ErrClosed)
	_, err = s.Acquire(e.background(), 0)
	require.ErrorIs(e.t, err, semcontract.ErrClosed)
	_, ok := s.TryAcquire(0)
	require.False(e.t, ok)
	_, ok = s.TryAcquire(1)
	require.False(e.t, ok)
	require.False(e.t, s.TryRelease(1))
	require.Zero(e.t, s.Refill(1))
	require.ErrorIs(e.t, s.SetLimit(4), semcontract.ErrClosed)
	s.Close()
	require.Equal(e.t, want, s.Stats())

	// Tokens already out can still be ended, and are accounted for.
	a.Release()
	b.Forget()
	want.Available, want.Held, want.Limit = 1, 0, 1
	require.Equal(e.t, want, s.Stats())
	_, ok = s.TryAcquire(1)
	require.False(e.t, ok, "free permits must stay out of reach once closed")
}
