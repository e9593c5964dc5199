package semtest

import (
	"context"
	"math"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/semcontract"
	"github.com/atomicsem/atomicsem/token"
)

// basicChecks are construction, bad input and the accounting of tokens.
var basicChecks = []check{
	{name: "NewRejectsBadArguments", f: newRejectsBadArguments},
	{name: "NewAcceptsTheEdges", f: newAcceptsTheEdges},
	{name: "RejectedCallsLeaveStatsUnchanged", f: rejectedCallsLeaveStatsUnchanged},
	{name: "TokenMisusePanicsAndLeavesStatsUnchanged", f: tokenMisusePanicsAndLeavesStatsUnchanged},
	{name: "TryAcquireAccounting", f: tryAcquireAccounting},
	{name: "TimedOutAcquireLeavesSemaphoreUnchanged", f: timedOutAcquireLeavesSemaphoreUnchanged},
	{name: "DoneContextFailsEvenWithFreePermits", f: doneContextFailsEvenWithFreePermits},
	{name: "AcquireZeroReturnsEmptyTokenAtOnce", f: acquireZeroReturnsEmptyTokenAtOnce},
	{name: "SplitPartsEndOnTheirOwn", f: splitPartsEndOnTheirOwn},
	{name: "PartialReleaseServesWaiters", f: partialReleaseServesWaiters},
}

func newRejectsBadArguments(e *env) {
	tests := []struct {
		name         string
		initial, max int64
	}{
		{"negative initial", -1, 5},
		{"negative max", 0, -1},
		{"initial above max", 6, 5},
		{"max above MaxPermits", 0, semcontract.MaxPermits + 1},
		{"both above MaxPermits", semcontract.MaxPermits + 1, semcontract.MaxPermits + 1},
	}
	for _, tt := range tests {
		s, err := e.newSem(e.t, tt.initial, tt.max)
		require.ErrorIs(e.t, err, semcontract.ErrInvalidPermits, tt.name)
		require.Nil(e.t, s, tt.name)
	}
}

func newAcceptsTheEdges(e *env) {
	tests := []struct {
		name         string
		initial, max int64
	}{
		{"empty", 0, 0},
		{"below its ceiling", 0, 10},
		{"widest", semcontract.MaxPermits, semcontract.MaxPermits},
	}
	for _, tt := range tests {
		s := e.new(tt.initial, tt.max)
		require.Equal(e.t, Stats{Available: tt.initial, Limit: tt.initial, Max: tt.max}, s.Stats(), tt.name)
	}
}

// Every kind of bad argument, against a semaphore with permits held and a
// waiter parked, leaves everything as it was. The parked waiter asks for
// more than the limit, so it stays parked whatever the rejected call does.
func rejectedCallsLeaveStatsUnchanged(e *env) {
	const max = 10
	tests := []struct {
		name string
		call func(s Semaphore)
	}{
		{"Acquire negative", func(s Semaphore) {
			tok, err := s.Acquire(e.background(), -1)
			require.ErrorIs(e.t, err, semcontract.ErrInvalidPermits)
			require.Zero(e.t, tok.Permits())
		}},
		{"Acquire above MaxPermits", func(s Semaphore) {
			_, err := s.Acquire(e.background(), semcontract.MaxPermits+1)
			require.ErrorIs(e.t, err, semcontract.ErrInvalidPermits)
		}},
		{"Acquire MaxInt64 with permits held", func(s Semaphore) {
			_, err := s.Acquire(e.background(), math.MaxInt64)
			require.ErrorIs(e.t, err, semcontract.ErrInvalidPermits)
		}},
		{"Acquire above max", func(s Semaphore) {
			// No limit could ever admit it, so it must fail at once
			// rather than wait: a wait would end in the deadline.
			ctx, cancel := context.WithTimeout(e.background(), patience)
			defer cancel()
			start := time.Now()
			_, err := s.Acquire(ctx, max+1)
			require.ErrorIs(e.t, err, semcontract.ErrExceedsMax)
			e.requireImmediate(start)
		}},
		{"Acquire MaxPermits above max", func(s Semaphore) {
			_, err := s.Acquire(e.background(), semcontract.MaxPermits)
			require.ErrorIs(e.t, err, semcontract.ErrExceedsMax)
		}},
		{"TryAcquire negative", func(s Semaphore) {
			_, ok := s.TryAcquire(-1)
			require.False(e.t, ok)
		}},
		{"TryAcquire above MaxPermits", func(s Semaphore) {
			_, ok := s.TryAcquire(semcontract.MaxPermits + 1)
			require.False(e.t, ok)
		}},
		{"TryAcquire MaxInt64 with permits held", func(s Semaphore) {
			_, ok := s.TryAcquire(math.MaxInt64)
			require.False(e.t, ok)
		}},
		{"TryAcquire above max", func(s Semaphore) {
			_, ok := s.TryAcquire(max + 1)
			require.False(e.t, ok)
		}},
		{"TryAcquire above available", func(s Semaphore) {
			_, ok := s.TryAcquire(s.Stats().Available + 1)
			require.False(e.t, ok)
		}},
		{"TryRelease zero", func(s Semaphore) { require.False(e.t, s.TryRelease(0)) }},
		{"TryRelease negative", func(s Semaphore) { require.False(e.t, s.TryRelease(-1)) }},
		{"TryRelease past max", func(s Semaphore) {
			require.False(e.t, s.TryRelease(max-s.Stats().Limit+1))
		}},
		{"TryRelease above MaxPermits", func(s Semaphore) {
			require.False(e.t, s.TryRelease(semcontract.MaxPermits+1))
		}},
		{"Refill zero", func(s Semaphore) { require.Zero(e.t, s.Refill(0)) }},
		{"Refill negative", func(s Semaphore) { require.Zero(e.t, s.Refill(-1)) }},
		{"SetLimit negative", func(s Semaphore) {
			require.ErrorIs(e.t, s.SetLimit(-1), semcontract.ErrInvalidPermits)
		}},
		{"SetLimit above max", func(s Semaphore) {
			require.ErrorIs(e.t, s.SetLimit(max+1), semcontract.ErrExceedsMax)
		}},
		{"Release of the zero Token", func(Semaphore) {
			var tok token.Token
			requireTokenPanic(e.t, tok.Release)
		}},
		{"Forget of the zero Token", func(Semaphore) {
			var tok token.Token
			requireTokenPanic(e.t, tok.Forget)
		}},
	}
	s := e.new(3, max)
	require.True(e.t, s.TryRelease(2))
	held := e.mustTake(s, 2)
	ctx, cancel := context.WithCancel(e.background())
	parked := e.park(s, ctx, 8)
	before := s.Stats()
	require.Equal(e.t, Stats{Available: 3, Held: 2, Limit: 5, Max: max, Waiters: 1}, before)
	for _, tt := range tests {
		tt.call(s)
		e.quiesce()
		require.Equal(e.t, before, s.Stats(), tt.name)
		require.False(e.t, parked.returned(), tt.name)
	}
	cancel()
	e.quiesce()
	require.ErrorIs(e.t, parked.err, context.Canceled)
	held.Release()
}

func tokenMisusePanicsAndLeavesStatsUnchanged(e *env) {
	tests := []struct {
		name          string
		first, second func(*token.Token)
	}{
		{"ReleaseTwice", (*token.Token).Release, (*token.Token).Release},
		{"ReleaseThenForget", (*token.Token).Release, (*token.Token).Forget},
		{"ForgetThenRelease", (*token.Token).Forget, (*token.Token).Release},
		{"ForgetTwice", (*token.Token).Forget, (*token.Token).Forget},
	}
	for _, tt := range tests {
		s := e.new(5, 5)
		other := e.mustTake(s, 1)
		tok := e.mustTake(s, 2)
		tt.first(tok)
		before := s.Stats()
		requireTokenPanic(e.t, func() { tt.second(tok) })
		require.Equal(e.t, before, s.Stats(), tt.name)
		require.Zero(e.t, tok.Permits(), tt.name)
		requireTokenPanic(e.t, func() { tok.Split(0) })
		other.Release()
	}
}

func tryAcquireAccounting(e *env) {
	// A step either tries to take n permits, expecting ok, or releases the
	// i-th token taken so far.
	type step struct {
		take    int64
		ok      bool
		release int
	}
	try := func(n int64, ok bool) step { return step{take: n, ok: ok, release: -1} }
	rel := func(i int) step { return step{release: i} }
	tests := []struct {
		name         string
		initial, max int64
		steps        []step
		want         counts
	}{
		{"fills then refuses", 2, 2,
			[]step{try(1, true), try(1, true), try(1, false), rel(0), try(1, true)},
			counts{Available: 0, Held: 2, Limit: 2}},
		{"weighted", 5, 5,
			[]step{try(3, true), try(3, false), try(2, true), try(1, false), rel(0), try(3, true)},
			counts{Available: 0, Held: 5, Limit: 5}},
		{"release gives back the token's own weight", 4, 4,
			[]step{try(1, true), try(3, true), rel(1), try(3, true), try(1, false), rel(0), try(1, true)},
			counts{Available: 0, Held: 4, Limit: 4}},
		{"zero fits in an empty semaphore", 0, 3,
			[]step{try(0, true), try(1, false), try(0, true)},
			counts{Available: 0, Held: 0, Limit: 0}},
		{"limit below max bounds the take", 2, 4,
			[]step{try(3, false), try(2, true), try(1, false), rel(0), try(2, true)},
			counts{Available: 0, Held: 2, Limit: 2}},
		{"all at once", 3, 3,
			[]step{try(3, true), try(1, false), rel(0), try(4, false), try(3, true)},
			counts{Available: 0, Held: 3, Limit: 3}},
	}
	for _, tt := range tests {
		s := e.new(tt.initial, tt.max)
		var toks []*token.Token
		for i, st := range tt.steps {
			if st.release >= 0 {
				toks[st.release].Release()
				continue
			}
			tok, ok := s.TryAcquire(st.take)
			require.Equal(e.t, st.ok, ok, "%s: step %d: TryAcquire(%d)", tt.name, i, st.take)
			if ok {
				require.Equal(e.t, st.take, tok.Permits())
				toks = append(toks, &tok)
			} else {
				require.Zero(e.t, tok.Permits())
			}
		}
		require.Equal(e.t, tt.want, countsOf(s), tt.name)
	}
}

func timedOutAcquireLeavesSemaphoreUnchanged(e *env) {
	tests := []struct {
		name string
		n    int64
	}{
		{"waits for a release", 1},
		{"waits for the limit to rise", 3},
	}
	for _, tt := range tests {
		s := e.new(2, 4)
		held := e.mustTake(s, 2)
		before := s.Stats()

		timeout := e.shortTimeout()
		ctx, cancel := context.WithTimeout(e.background(), timeout)
		start := time.Now()
		tok, err := s.Acquire(ctx, tt.n)
		cancel()
		require.Equal(e.t, context.DeadlineExceeded, err, "%s: ctx.Err() must come back unwrapped", tt.name)
		if e.c.bubble {
			require.Equal(e.t, timeout, time.Since(start), tt.name)
		}
		require.Zero(e.t, tok.Permits())
		require.Equal(e.t, before, s.Stats(), tt.name)

		held.Release()
		e.mustTake(s, 2).Release() // nothing leaked to the timed-out waiter
	}
}

func doneContextFailsEvenWithFreePermits(e *env) {
	cancelled, cancel := context.WithCancel(e.background())
	cancel()
	expired, cancel2 := context.WithDeadline(e.background(), time.Now().Add(-time.Second))
	defer cancel2()
	tests := []struct {
		name string
		ctx  context.Context
		n    int64
		want error
	}{
		{"cancelled", cancelled, 1, context.Canceled},
		{"cancelled, zero permits", cancelled, 0, context.Canceled},
		{"deadline passed", expired, 2, context.DeadlineExceeded},
	}
	s := e.new(3, 3)
	before := s.Stats()
	for _, tt := range tests {
		tok, err := s.Acquire(tt.ctx, tt.n)
		require.Equal(e.t, tt.want, err, "%s: ctx.Err() must come back unwrapped", tt.name)
		require.Zero(e.t, tok.Permits())
		require.Equal(e.t, before, s.Stats(), tt.name)
	}
}

// Asking for nothing, in every state where asking for something would
// wait, never waits.
func acquireZeroReturnsEmptyTokenAtOnce(e *env) {
	tests := []struct {
		name  string
		setup func(s Semaphore) (cleanup func())
	}{
		{"empty", func(Semaphore) func() { return func() {} }},
		{"in debt", func(s Semaphore) func() {
			require.True(e.t, s.TryRelease(2))
			held := e.mustTake(s, 2)
			require.NoError(e.t, s.SetLimit(0))
			return func() { held.Release() }
		}},
		{"behind a parked waiter", func(s Semaphore) func() {
			ctx, cancel := context.WithCancel(e.background())
			p := e.park(s, ctx, 1)
			return func() {
				cancel()
				e.waitFor(p)
			}
		}},
	}
	for _, tt := range tests {
		s := e.new(0, 4)
		cleanup := tt.setup(s)
		before := s.Stats()

		ctx, cancel := context.WithTimeout(e.background(), patience)
		start := time.Now()
		tok, err := s.Acquire(ctx, 0)
		cancel()
		require.NoError(e.t, err, tt.name)
		e.requireImmediate(start, "%s: Acquire(0) waited", tt.name)
		require.Zero(e.t, tok.Permits())
		require.Equal(e.t, before, s.Stats(), tt.name)
		tok.Release()
		require.Equal(e.t, before, s.Stats(), tt.name)

		try, ok := s.TryAcquire(0)
		require.True(e.t, ok, tt.name)
		try.Forget()
		require.Equal(e.t, before, s.Stats(), "%s: forgetting nothing must not move the limit", tt.name)
		cleanup()
	}
}

// Split moves part of a token's permits into a token of its own; each part
// is released or forgotten on its own, with its own count.
func splitPartsEndOnTheirOwn(e *env) {
	s := e.new(5, 8)
	tok := e.mustTake(s, 4)

	_, ok := tok.Split(-1)
	require.False(e.t, ok, "Split(-1)")
	_, ok = tok.Split(5)
	require.False(e.t, ok, "Split of more than the token holds")
	require.Equal(e.t, int64(4), tok.Permits())

	part, ok := tok.Split(1)
	require.True(e.t, ok)
	require.Equal(e.t, int64(3), tok.Permits())
	require.Equal(e.t, int64(1), part.Permits())
	require.Equal(e.t, counts{Available: 1, Held: 4, Limit: 5}, countsOf(s), "a split changes no count")

	part.Release()
	require.Equal(e.t, counts{Available: 2, Held: 3, Limit: 5}, countsOf(s))

	spent, ok := tok.Split(2)
	require.True(e.t, ok)
	spent.Forget()
	require.Equal(e.t, counts{Available: 2, Held: 1, Limit: 3}, countsOf(s), "a forgotten part lowers the limit by its count")

	nothing, ok := tok.Split(0)
	require.True(e.t, ok)
	nothing.Forget()
	require.Equal(e.t, counts{Available: 2, Held: 1, Limit: 3}, countsOf(s))

	all, ok := tok.Split(1)
	require.True(e.t, ok)
	tok.Release() // holds nothing now
	require.Equal(e.t, counts{Available: 2, Held: 1, Limit: 3}, countsOf(s))
	all.Release()
	require.Equal(e.t, Stats{Available: 3, Held: 0, Limit: 3, Max: 8}, s.Stats())
	requireTokenPanic(e.t, all.Release)
	requireTokenPanic(e.t, part.Forget)
}

// A part released while the rest is still held frees its permits at once:
// a waiter that they fit is served.
func partialReleaseServesWaiters(e *env) {
	s := e.new(2, 2)
	tok := e.mustTake(s, 2)
	waiter := e.park(s, e.background(), 1)

	part, ok := tok.Split(1)
	require.True(e.t, ok)
	part.Release()
	e.quiesce()
	e.requireGranted(waiter, 1)
	require.Equal(e.t, Stats{Available: 0, Held: 2, Limit: 2, Max: 2}, s.Stats())
	tok.Release()
	waiter.tok.Release()
	require.Equal(e.t, Stats{Available: 2, Held: 0, Limit: 2, Max: 2}, s.Stats())
}
