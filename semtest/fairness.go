package semtest

import (
	"context"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/token"
)

// fairnessChecks are the order of grants: FIFO with head-of-line blocking,
// requests above the limit passed over, and waiters that give up.
var fairnessChecks = []check{
	{name: "ReleaseGrantsParkedWaitersInArrivalOrder", f: releaseGrantsParkedWaitersInArrivalOrder, fifo: true},
	{name: "ReleaseGrantsExactlyTheSatisfiablePrefix", f: releaseGrantsExactlyTheSatisfiablePrefix, fifo: true},
	{name: "GrantsFollowArrivalOrder", f: grantsFollowArrivalOrder, fifo: true},
	{name: "ArrivalsDoNotOvertakeParkedWaiter", f: arrivalsDoNotOvertakeParkedWaiter, fifo: true},
	{name: "BargingArrivalsTakeFreePermits", f: bargingArrivalsTakeFreePermits, barging: true, fakeTime: true},
	{name: "FrontWaiterThatDoesNotFitYetHoldsBackOthers", f: frontWaiterThatDoesNotFitYetHoldsBackOthers, fifo: true},
	{name: "RaisedLimitMakesAnOversizedWaiterHoldBackArrivals", f: raisedLimitMakesAnOversizedWaiterHoldBackArrivals, fifo: true},
	{name: "RequestAboveLimitDoesNotBlockSmallerOnes", f: requestAboveLimitDoesNotBlockSmallerOnes},
	{name: "WaiterAboveLoweredLimitDoesNotBlockOthers", f: waiterAboveLoweredLimitDoesNotBlockOthers, fifo: true},
	{name: "ForgetLetsFollowersPassHeadAboveNewLimit", f: forgetLetsFollowersPassHeadAboveNewLimit},
	{name: "ForgetThatLowersTheLimitBelowAWaiterLetsArrivalsPass", f: forgetThatLowersTheLimitBelowAWaiterLetsArrivalsPass},
	{name: "GrantThatLeavesOnlyAnOversizedWaiterLetsArrivalsPass", f: grantThatLeavesOnlyAnOversizedWaiterLetsArrivalsPass},
	{name: "ReleaseOnTopOfFreePermitsServesTheWaitersBehindTheFront", f: releaseOnTopOfFreePermitsServesTheWaitersBehindTheFront},
	{name: "CancelledFrontWaiterWakesItsSuccessor", f: cancelledFrontWaiterWakesItsSuccessor, fifo: true},
	{name: "CancelledHeadWakesFollowers", f: cancelledHeadWakesFollowers},
	{name: "LargeAcquireNotStarvedBySmallOnes", f: largeAcquireNotStarvedBySmallOnes, fakeTime: true},
}

// Bug shape: a release that wakes the wrong waiter, wakes more or fewer than
// the permits serve, or lets a newcomer take permits meant for the queue.
func releaseGrantsParkedWaitersInArrivalOrder(e *env) {
	s := e.new(0, 4)
	var ps []*pending
	for range 4 {
		ps = append(ps, e.park(s, e.background(), 1))
	}

	require.True(e.t, s.TryRelease(1))
	e.quiesce()
	e.requireReturned(ps, 0)
	e.requireGranted(ps[0], 1)

	// A newcomer must not overtake the queue.
	_, ok := s.TryAcquire(1)
	require.False(e.t, ok)

	require.True(e.t, s.TryRelease(2))
	e.quiesce()
	e.requireReturned(ps, 0, 1, 2)

	ps[0].tok.Release()
	e.quiesce()
	e.requireReturned(ps, 0, 1, 2, 3)
	require.Equal(e.t, Stats{Available: 0, Held: 3, Limit: 3, Max: 4}, s.Stats())
	for _, p := range ps[1:] {
		p.tok.Release()
	}
	require.Equal(e.t, Stats{Available: 3, Held: 0, Limit: 3, Max: 4}, s.Stats())
}

// Bug shape: a release that wakes every waiter, or only the first, instead of
// exactly the prefix of the queue that the released permits satisfy.
func releaseGrantsExactlyTheSatisfiablePrefix(e *env) {
	s := e.new(0, 8)
	var ps []*pending
	for _, n := range []int64{1, 1, 3, 1} {
		ps = append(ps, e.park(s, e.background(), n))
	}

	require.True(e.t, s.TryRelease(2))
	e.quiesce()
	e.requireReturned(ps, 0, 1)
	e.requireGranted(ps[0], 1)
	e.requireGranted(ps[1], 1)
	require.Equal(e.t, Stats{Available: 0, Held: 2, Limit: 2, Max: 8, Waiters: 2}, s.Stats())

	// Two more are free, but the 3 at the front does not fit yet, and the 1
	// behind it must not go first.
	require.True(e.t, s.TryRelease(2))
	e.quiesce()
	e.requireReturned(ps, 0, 1)
	require.Equal(e.t, Stats{Available: 2, Held: 2, Limit: 4, Max: 8, Waiters: 2}, s.Stats())

	ps[0].tok.Release()
	e.quiesce()
	e.requireReturned(ps, 0, 1, 2)
	e.requireGranted(ps[2], 3)
	require.Equal(e.t, Stats{Available: 0, Held: 4, Limit: 4, Max: 8, Waiters: 1}, s.Stats())

	ps[1].tok.Release()
	e.quiesce()
	e.requireReturned(ps, 0, 1, 2, 3)
	e.requireGranted(ps[3], 1)
	ps[2].tok.Release()
	ps[3].tok.Release()
	require.Equal(e.t, Stats{Available: 4, Held: 0, Limit: 4, Max: 8}, s.Stats())
}

// Waiters of mixed weights, fed one permit at a time: each must be served
// exactly when the permits fed reach the sum of its weight and the weights
// ahead of it. A light waiter served earlier would have overtaken a heavy
// one.
func grantsFollowArrivalOrder(e *env) {
	weights := []int64{2, 1, 3, 1, 2}
	var wantAt []int64 // permits fed when each waiter is due
	var sum int64
	for _, n := range weights {
		sum += n
		wantAt = append(wantAt, sum)
	}

	// Each feeder starts a semaphore with nothing available and returns a
	// function that makes one more permit available.
	feeders := []struct {
		name  string
		start func() (Semaphore, func())
	}{
		{"TryRelease", func() (Semaphore, func()) {
			// The limit starts at the heaviest weight, all of it held, so
			// that no waiter asks for more than the limit (such a waiter
			// would rightly be passed over).
			s := e.new(3, sum+3)
			e.mustTake(s, 3)
			return s, func() { require.True(e.t, s.TryRelease(1)) }
		}},
		{"Release", func() (Semaphore, func()) {
			s := e.new(sum, sum)
			var held []*token.Token
			for range sum {
				held = append(held, e.mustTake(s, 1))
			}
			return s, func() {
				held[0].Release()
				held = held[1:]
			}
		}},
	}
	for _, f := range feeders {
		s, feed := f.start()
		var waiters []*pending
		for _, n := range weights {
			waiters = append(waiters, e.park(s, e.background(), n))
		}

		var order []int
		gotAt := make([]int64, len(weights))
		for fed := int64(1); fed <= sum; fed++ {
			feed()
			e.quiesce()
			for i, w := range waiters {
				if gotAt[i] == 0 && w.returned() {
					require.NoError(e.t, w.err)
					gotAt[i] = fed
					order = append(order, i)
				}
			}
		}
		require.Equal(e.t, []int{0, 1, 2, 3, 4}, order, f.name)
		require.Equal(e.t, wantAt, gotAt, f.name)
		st := s.Stats()
		require.Zero(e.t, st.Available, f.name)
		require.Zero(e.t, st.Waiters, f.name)
		for _, w := range waiters {
			w.tok.Release()
		}
	}
}

func arrivalsDoNotOvertakeParkedWaiter(e *env) {
	s := e.new(2, 2)
	held := e.mustTake(s, 1)
	big := e.park(s, e.background(), 2)
	before := s.Stats()
	require.Equal(e.t, Stats{Available: 1, Held: 1, Limit: 2, Max: 2, Waiters: 1}, before)

	_, ok := s.TryAcquire(1)
	require.False(e.t, ok, "TryAcquire must not take the free permit ahead of a parked waiter")
	ctx, cancel := context.WithTimeout(e.background(), e.shortTimeout())
	defer cancel()
	_, err := s.Acquire(ctx, 1)
	require.Equal(e.t, context.DeadlineExceeded, err, "Acquire must queue behind the parked waiter")
	require.Equal(e.t, before, s.Stats())

	held.Release()
	e.quiesce()
	e.requireGranted(big, 2)
	big.tok.Release()
}

// The barging counterpart of ArrivalsDoNotOvertakeParkedWaiter: an arrival
// takes free permits even while a waiter is parked, as long as the waiter
// has not waited past the starvation bound (no fake time passes here).
func bargingArrivalsTakeFreePermits(e *env) {
	s := e.new(2, 2)
	held := e.mustTake(s, 1)
	big := e.park(s, e.background(), 2)

	tok, ok := s.TryAcquire(1)
	require.True(e.t, ok, "a barging arrival must take a free permit")
	tok.Release()
	tok, err := s.Acquire(e.background(), 1)
	require.NoError(e.t, err)
	tok.Release()
	e.quiesce()
	require.False(e.t, big.returned())

	held.Release()
	e.quiesce()
	e.requireGranted(big, 2)
	big.tok.Release()
}

// Bug shape: head-of-line blocking done wrong. A front waiter that fits the
// limit but not the free permits must hold back the smaller waiters behind
// it (and newcomers), or a stream of small requests starves it.
func frontWaiterThatDoesNotFitYetHoldsBackOthers(e *env) {
	s := e.new(2, 2)
	t1, t2 := e.mustTake(s, 1), e.mustTake(s, 1)
	ps := []*pending{e.park(s, e.background(), 2), e.park(s, e.background(), 1)}

	t1.Release()
	e.quiesce()
	e.requireReturned(ps)
	_, ok := s.TryAcquire(1)
	require.False(e.t, ok, "a newcomer overtook the queue")
	require.Equal(e.t, Stats{Available: 1, Held: 1, Limit: 2, Max: 2, Waiters: 2}, s.Stats())

	t2.Release()
	e.quiesce()
	e.requireReturned(ps, 0)
	e.requireGranted(ps[0], 2)

	ps[0].tok.Release()
	e.quiesce()
	e.requireReturned(ps, 0, 1)
	e.requireGranted(ps[1], 1)
	ps[1].tok.Release()
	require.Equal(e.t, Stats{Available: 2, Held: 0, Limit: 2, Max: 2}, s.Stats())
}

// A limit raised past an oversized waiter's request makes it a waiter
// that a release could serve: from then on it holds back arrivals.
func raisedLimitMakesAnOversizedWaiterHoldBackArrivals(e *env) {
	s := e.new(2, 8)
	a, b := e.mustTake(s, 1), e.mustTake(s, 1)
	large := e.park(s, e.background(), 3)

	// The limit rises to 4: two permits are free, the waiter wants three
	// and now fits the limit.
	require.NoError(e.t, s.SetLimit(4))
	e.quiesce()
	_, ok := s.TryAcquire(1)
	require.False(e.t, ok, "an arrival overtook a waiter that the raised limit admits: %+v", s.Stats())

	// One more permit back, and it is served.
	a.Release()
	e.quiesce()
	e.requireGranted(large, 3)
	large.tok.Release()
	b.Release()
	require.Equal(e.t, Stats{Available: 4, Limit: 4, Max: 8}, s.Stats())
}

// A request that the current limit cannot admit must not hold back the
// requests behind it, and must be served once the limit is raised.
func requestAboveLimitDoesNotBlockSmallerOnes(e *env) {
	s := e.new(2, 10)
	big := e.park(s, e.background(), 5)

	small := e.mustTake(s, 1)
	ctx, cancel := context.WithTimeout(e.background(), patience)
	defer cancel()
	start := time.Now()
	other, err := s.Acquire(ctx, 1)
	require.NoError(e.t, err)
	e.requireImmediate(start, "Acquire waited behind a request above the limit")

	// A small request that has to wait queues behind the big one, and is
	// served by a release all the same.
	third := e.park(s, e.background(), 1)
	require.Equal(e.t, 2, s.Stats().Waiters)
	small.Release()
	e.quiesce()
	e.requireGranted(third, 1)
	other.Release()
	third.tok.Release()
	require.False(e.t, big.returned())

	require.NoError(e.t, s.SetLimit(5))
	e.quiesce()
	e.requireGranted(big, 5)
	require.Equal(e.t, Stats{Available: 0, Held: 5, Limit: 5, Max: 10}, s.Stats())
	big.tok.Release()
}

// Bug shape: the weighted lost wake-up. A waiter at the front that asks for
// more than the limit, once the limit has been lowered under it, can never
// be served by a release; if it still held back the queue, the small waiter
// behind it would never be served.
func waiterAboveLoweredLimitDoesNotBlockOthers(e *env) {
	tests := []struct {
		name  string
		lower func(s Semaphore, t1 *token.Token)
		// release are the tokens still to release, in order; W(1) must be
		// granted by the last one and not before.
		release  func(t1, t2 *token.Token) []*token.Token
		afterLow Stats
	}{
		{
			name:     "SetLimit",
			lower:    func(s Semaphore, _ *token.Token) { require.NoError(e.t, s.SetLimit(1)) },
			release:  func(t1, t2 *token.Token) []*token.Token { return []*token.Token{t1, t2} },
			afterLow: Stats{Available: -1, Held: 2, Limit: 1, Max: 2, Waiters: 2},
		},
		{
			name:     "Forget",
			lower:    func(_ Semaphore, t1 *token.Token) { t1.Forget() },
			release:  func(_, t2 *token.Token) []*token.Token { return []*token.Token{t2} },
			afterLow: Stats{Available: 0, Held: 1, Limit: 1, Max: 2, Waiters: 2},
		},
	}
	for _, tt := range tests {
		s := e.new(2, 2)
		t1, t2 := e.mustTake(s, 1), e.mustTake(s, 1)
		ps := []*pending{e.park(s, e.background(), 2), e.park(s, e.background(), 1)}

		tt.lower(s, t1)
		e.quiesce()
		e.requireReturned(ps)
		require.Equal(e.t, tt.afterLow, s.Stats(), tt.name)

		toks := tt.release(t1, t2)
		for i, tok := range toks {
			tok.Release()
			e.quiesce()
			if i < len(toks)-1 {
				e.requireReturned(ps)
			}
		}
		e.requireReturned(ps, 1)
		e.requireGranted(ps[1], 1)
		require.Equal(e.t, Stats{Available: 0, Held: 1, Limit: 1, Max: 2, Waiters: 1}, s.Stats(), tt.name)

		// W(2) kept its place: once the limit admits it again, it is
		// served as soon as its permits are free.
		require.NoError(e.t, s.SetLimit(2))
		e.quiesce()
		e.requireReturned(ps, 1)
		ps[1].tok.Release()
		e.quiesce()
		e.requireGranted(ps[0], 2)
		require.Equal(e.t, Stats{Available: 0, Held: 2, Limit: 2, Max: 2}, s.Stats(), tt.name)
		ps[0].tok.Release()
	}
}

// A Forget that lowers the limit under a parked head makes it a head above
// the limit: the follower behind it must be served with what is free (in
// FIFO mode; a barging follower takes the free permit on arrival).
func forgetLetsFollowersPassHeadAboveNewLimit(e *env) {
	s := e.new(4, 4)
	held := e.mustTake(s, 3)
	ctx, cancel := context.WithCancel(e.background())
	defer cancel()
	head := e.park(s, ctx, 4)
	follower := e.goAcquire(ctx, e.handleFor(s), 1)
	e.quiesce()

	held.Forget() // limit 1, one permit free
	e.quiesce()
	e.requireGranted(follower, 1)
	require.False(e.t, head.returned())

	cancel()
	e.quiesce()
	require.Equal(e.t, context.Canceled, head.err)
	follower.tok.Release()
	require.Equal(e.t, Stats{Available: 1, Limit: 1, Max: 4}, s.Stats())
}

// The mirror image of RaisedLimitMakesAnOversizedWaiterHoldBackArrivals: a
// token forgotten while a waiter that fits is queued lowers the limit below
// that waiter's request; arrivals must then pass it.
func forgetThatLowersTheLimitBelowAWaiterLetsArrivalsPass(e *env) {
	s := e.new(4, 8)
	big, small := e.mustTake(s, 2), e.mustTake(s, 1)
	waiter := e.park(s, e.background(), 4)

	big.Forget() // limit 2: the waiter for 4 no longer fits
	e.quiesce()
	tok, ok := s.TryAcquire(1)
	require.True(e.t, ok, "an oversized waiter held back an arrival: %+v", s.Stats())
	tok.Release()
	small.Release()

	// TryRelease brings the limit back to 4 with all of it free: the
	// waiter is served at once.
	require.True(e.t, s.TryRelease(2))
	e.quiesce()
	e.requireGranted(waiter, 4)
	waiter.tok.Release()
}

// A grant that leaves behind it only a waiter above the limit: arrivals
// must not queue behind that waiter.
func grantThatLeavesOnlyAnOversizedWaiterLetsArrivalsPass(e *env) {
	s := e.new(1, 4)
	holder := e.mustTake(s, 1)
	front := e.park(s, e.background(), 1)
	ctx, cancel := context.WithCancel(e.background())
	oversized := e.park(s, ctx, 2)

	holder.Release()
	e.quiesce()
	e.requireGranted(front, 1)

	front.tok.Release()
	tok, ok := s.TryAcquire(1)
	require.True(e.t, ok, "a waiter above the limit held back an arrival: %+v", s.Stats())
	tok.Release()
	cancel()
	e.quiesce()
	require.ErrorIs(e.t, oversized.err, context.Canceled)
	require.Equal(e.t, Stats{Available: 1, Limit: 1, Max: 4}, s.Stats())
}

// Bug shape: a release that hands its permits to the front waiter as if
// nothing else were free. Here one permit is already free (the front waiter
// asks for two), so the two that come back serve the front waiter and the
// one behind it.
func releaseOnTopOfFreePermitsServesTheWaitersBehindTheFront(e *env) {
	s := e.new(3, 3)
	one := e.mustTake(s, 1)
	two := e.mustTake(s, 2)
	front := e.park(s, e.background(), 2)
	behind := e.park(s, e.background(), 1)

	one.Release() // one free: not enough for the front waiter
	e.quiesce()
	require.False(e.t, front.returned())
	require.False(e.t, behind.returned())

	two.Release()
	e.quiesce()
	e.requireGranted(front, 2)
	e.requireGranted(behind, 1)
	front.tok.Release()
	behind.tok.Release()
	require.Equal(e.t, Stats{Available: 3, Limit: 3, Max: 3}, s.Stats())
}

// Bug shape (golang/go#37852): a waiter at the front that gives up leaves
// the waiters behind it parked although the permits they need are free.
func cancelledFrontWaiterWakesItsSuccessor(e *env) {
	tests := []struct {
		name string
		ctx  func(context.Context) (context.Context, func()) // the front waiter's
	}{
		{
			name: "cancel",
			ctx: func(parent context.Context) (context.Context, func()) {
				return context.WithCancel(parent)
			},
		},
		{
			// Long enough to park both waiters first, on a server too.
			name: "deadline",
			ctx: func(parent context.Context) (context.Context, func()) {
				return context.WithTimeout(parent, time.Second)
			},
		},
	}
	for _, tt := range tests {
		s := e.new(2, 2)
		held := e.mustTake(s, 1)
		ctx, cancel := tt.ctx(e.background())
		front := e.park(s, ctx, 2)
		next := e.park(s, e.background(), 1)

		if tt.name == "cancel" {
			cancel()
		}
		<-ctx.Done()
		e.quiesce()
		require.True(e.t, front.returned(), tt.name)
		require.ErrorIs(e.t, front.err, ctx.Err())
		require.Zero(e.t, front.tok.Permits())
		e.requireGranted(next, 1)
		require.Equal(e.t, Stats{Available: 0, Held: 2, Limit: 2, Max: 2}, s.Stats(), tt.name)

		held.Release()
		next.tok.Release()
		require.Equal(e.t, Stats{Available: 2, Held: 0, Limit: 2, Max: 2}, s.Stats(), tt.name)
		cancel()
	}
}

// A parked waiter that holds back others is cancelled: the followers that
// now fit must be served without waiting for another release, and the one
// that does not fit must stay parked.
func cancelledHeadWakesFollowers(e *env) {
	s := e.new(2, 4)
	held := e.mustTake(s, 1)
	ctx, cancel := context.WithCancel(e.background())
	defer cancel()
	head := e.park(s, ctx, 2)
	// In FIFO order both park behind the head; a barging arrival takes the
	// free permit at once.
	first := e.goAcquire(e.background(), e.handleFor(s), 1)
	e.quiesce()
	second := e.goAcquire(e.background(), e.handleFor(s), 1)
	e.quiesce()
	require.False(e.t, head.returned())
	require.False(e.t, second.returned())

	cancel()
	e.quiesce()
	require.Equal(e.t, context.Canceled, head.err)
	e.requireGranted(first, 1)
	require.False(e.t, second.returned(), "nothing is left for the second follower")
	require.Equal(e.t, Stats{Available: 0, Held: 2, Limit: 2, Max: 4, Waiters: 1}, s.Stats())

	held.Release()
	e.quiesce()
	e.requireGranted(second, 1)
	first.tok.Release()
	second.tok.Release()
	require.Equal(e.t, Stats{Available: 2, Limit: 2, Max: 4}, s.Stats())
}

// A stream of small acquirers whose holds overlap, so that the permits are
// never all free at once on their own, against a request for all of them:
// FIFO must serve it as soon as the holds in progress end, and barging once
// it has waited past the starvation bound (within three bounds, which
// leaves the hand-off time to drain the holds). Time is the bubble's fake
// clock, so the bounds are exact.
func largeAcquireNotStarvedBySmallOnes(e *env) {
	const (
		permits = 4
		hold    = 100 * time.Microsecond
	)
	within := 2 * hold
	if e.c.barging {
		if e.c.bound == 0 {
			e.t.Skip("semtest: a barging semaphore without a declared StarvationBound")
		}
		within = 3 * e.c.bound
	}
	s := e.new(permits, permits)
	stop := make(chan struct{})
	streamDone := make(chan struct{}, permits)
	// Runs on failure too: the bubble must not end with goroutines in it.
	defer func() {
		close(stop)
		for range permits {
			<-streamDone
		}
	}()
	for i := range permits {
		go func() {
			defer func() { streamDone <- struct{}{} }()
			// Stagger the holds so that they overlap.
			time.Sleep(time.Duration(i) * hold / permits)
			for {
				select {
				case <-stop:
					return
				default:
				}
				var tok token.Token
				if i%2 == 0 {
					var ok bool
					if tok, ok = s.TryAcquire(1); !ok {
						time.Sleep(hold / 10)
						continue
					}
				} else {
					var err error
					if tok, err = s.Acquire(context.Background(), 1); err != nil {
						e.t.Error(err)
						return
					}
				}
				time.Sleep(hold)
				tok.Release()
			}
		}()
	}
	time.Sleep(2 * hold) // the stream is in full flow

	ctx, cancel := context.WithTimeout(context.Background(), 10*within)
	defer cancel()
	start := time.Now()
	big, err := s.Acquire(ctx, permits)
	waited := time.Since(start)
	require.NoError(e.t, err, "the large request starved")
	big.Release()
	require.LessOrEqual(e.t, waited, within)
	e.t.Logf("served after %v", waited)
}
