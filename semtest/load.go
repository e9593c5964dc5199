package semtest

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/token"
)

// loadChecks run real goroutines against each other, outside any bubble.
var loadChecks = []check{
	{name: "HeldNeverExceedsLimitUnderLoad", f: heldNeverExceedsLimitUnderLoad, realTime: true},
	{name: "GrantRacingCancelGivesPermitsBack", f: grantRacingCancelGivesPermitsBack, realTime: true},
	{name: "StatsInvariantsHoldUnderChurn", f: statsInvariantsHoldUnderChurn, realTime: true},
	{name: "ReleaseSynchronizesBeforeAcquire", f: releaseSynchronizesBeforeAcquire, realTime: true, memoryModel: true},
}

// timeout returns a context that ends after d, stretched a hundredfold
// for a semaphore outside a bubble, whose calls take round trips.
func (e *env) timeout(d time.Duration) (context.Context, context.CancelFunc) {
	if !e.c.bubble {
		d *= 100
	}
	return context.WithTimeout(e.background(), d)
}

// Mixed weights, some of them zero, through Acquire, TryAcquire and
// acquires that time out, with what is held tracked in a counter of the
// check's own: the semaphore must never grant past its limit, and must end
// exactly where it started.
func heldNeverExceedsLimitUnderLoad(e *env) {
	const limit = 10
	s := e.new(limit, limit)
	start := s.Stats()
	// A semaphore that stops granting shows as acquires that fail rather
	// than as a hung run.
	stuck, cancelStuck := context.WithTimeout(e.background(), patience)
	defer cancelStuck()
	var inUse, peak, granted atomic.Int64
	var wg sync.WaitGroup
	for g := range e.c.goroutines {
		h := e.handleFor(s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range e.c.rounds {
				n := rng.Int64N(limit + 1)
				var tok token.Token
				switch rng.IntN(8) {
				case 0:
					var ok bool
					if tok, ok = h.TryAcquire(n); !ok {
						continue
					}
				case 1:
					ctx, cancel := e.timeout(time.Duration(rng.IntN(50)) * time.Microsecond)
					var err error
					tok, err = h.Acquire(ctx, n)
					cancel()
					if errors.Is(err, context.DeadlineExceeded) {
						continue
					}
					if err != nil {
						e.t.Errorf("Acquire(%d): %v", n, err)
						return
					}
				default:
					var err error
					if tok, err = h.Acquire(stuck, n); err != nil {
						e.t.Errorf("Acquire(%d): %v", n, err)
						return
					}
				}
				granted.Add(1)
				cur := inUse.Add(n)
				if p := peak.Load(); cur > p {
					peak.CompareAndSwap(p, cur)
				}
				if cur > limit {
					e.t.Errorf("%d permits held, limit %d", cur, limit)
				}
				if rng.IntN(2) == 0 {
					runtime.Gosched()
				}
				inUse.Add(-n)
				tok.Release()
			}
		}()
	}
	wg.Wait()
	require.Equal(e.t, start, s.Stats())
	e.t.Logf("%d grants, peak %d of %d permits held", granted.Load(), peak.Load(), limit)
}

// A parked waiter cancelled at about the moment a release serves it, many
// times. Whichever wins, the permit must end up with the waiter (which then
// releases it) or go on to the follower parked behind it; a leak shows as
// a follower that never returns or as Stats that do not come back to full.
func grantRacingCancelGivesPermitsBack(e *env) {
	rng := rand.New(rand.NewPCG(3, 4))
	var granted, cancelled int
	for range e.c.races {
		s := e.new(1, 1)
		held := e.mustTake(s, 1)
		ctx, cancel := context.WithCancel(e.background())
		head := e.goAcquire(ctx, e.handleFor(s), 1)
		e.awaitWaiters(s, 1)
		follower := e.goAcquire(e.background(), e.handleFor(s), 1)
		e.awaitWaiters(s, 2)

		// Start both at once, each after a short random spin, so that
		// either may land first or inside the other. Outside a bubble the
		// spin is a random sleep of up to a few milliseconds, the time a
		// grant takes to travel through a server.
		var gate, both sync.WaitGroup
		gate.Add(1)
		for _, act := range []func(){cancel, held.Release} {
			spin := rng.IntN(64)
			both.Add(1)
			go func() {
				defer both.Done()
				gate.Wait()
				if !e.c.bubble {
					time.Sleep(time.Duration(spin) * 50 * time.Microsecond)
				}
				for range spin {
					runtime.Gosched()
				}
				act()
			}()
		}
		gate.Done()
		both.Wait()

		e.waitFor(head)
		if head.err == nil {
			granted++
			head.tok.Release()
		} else {
			cancelled++
			require.Equal(e.t, context.Canceled, head.err)
		}
		e.waitFor(follower)
		require.NoError(e.t, follower.err)
		follower.tok.Release()
		require.Equal(e.t, Stats{Available: 1, Limit: 1, Max: 1}, s.Stats())
	}
	e.t.Logf("head granted %d times, cancelled %d times", granted, cancelled)
}

// Stats sampled while every operation that moves the counts runs at once:
// each snapshot must be a state the semaphore could be in, and once the
// churn stops nothing may be held.
func statsInvariantsHoldUnderChurn(e *env) {
	const ceiling = 8
	s := e.new(4, ceiling)
	stop := make(chan struct{})
	var workers, sampler sync.WaitGroup
	var samples atomic.Int64

	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			st := s.Stats()
			samples.Add(1)
			switch {
			case st.Available+st.Held != st.Limit:
				e.t.Errorf("Available+Held != Limit in %+v", st)
			case st.Limit < 0 || st.Limit > st.Max || st.Max != ceiling:
				e.t.Errorf("limit out of [0, Max] in %+v", st)
			case st.Held < 0 || st.Held > st.Max:
				e.t.Errorf("held out of [0, Max] in %+v", st)
			case st.Waiters < 0 || st.Closed:
				e.t.Errorf("bad waiters or closed in %+v", st)
			}
			select {
			case <-stop:
				return
			default:
				runtime.Gosched()
			}
		}
	}()

	workersN := max(2, e.c.goroutines*3/8)
	for g := range workersN {
		h := e.handleFor(s)
		workers.Add(1)
		go func() {
			defer workers.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			for range e.c.rounds {
				switch rng.IntN(10) {
				case 0:
					_ = h.SetLimit(rng.Int64N(ceiling + 1))
				case 1:
					h.TryRelease(rng.Int64N(3) + 1)
				default:
					n := rng.Int64N(ceiling + 1)
					ctx, cancel := e.timeout(time.Duration(rng.IntN(200)) * time.Microsecond)
					tok, err := h.Acquire(ctx, n)
					cancel()
					if err != nil {
						if !errors.Is(err, context.DeadlineExceeded) {
							e.t.Errorf("Acquire(%d): %v", n, err)
						}
						continue
					}
					runtime.Gosched()
					if rng.IntN(4) == 0 {
						tok.Forget()
					} else {
						tok.Release()
					}
				}
			}
		}()
	}
	workers.Wait()
	close(stop)
	sampler.Wait()

	st := s.Stats()
	require.Zero(e.t, st.Held)
	require.Equal(e.t, st.Limit, st.Available)
	require.Zero(e.t, st.Waiters)
	require.Positive(e.t, samples.Load())
}

// A plain variable passed between goroutines with nothing but the
// semaphore to order the accesses. Under -race, any path by which permits
// reach an acquirer without a happens-before edge from the release shows
// up as a data race.
func releaseSynchronizesBeforeAcquire(e *env) {
	stuck, cancelStuck := context.WithTimeout(e.background(), patience)
	defer cancelStuck()
	rounds := max(e.c.rounds*2, 1)

	// Token release.
	const goroutines = 4
	s := e.new(1, 1)
	shared := 0 // guarded by s alone
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				var tok token.Token
				if (g+i)%3 == 0 {
					var ok bool
					for tok, ok = s.TryAcquire(1); !ok; tok, ok = s.TryAcquire(1) {
						runtime.Gosched()
					}
				} else {
					var err error
					if tok, err = s.Acquire(stuck, 1); err != nil {
						e.t.Error(err)
						return
					}
				}
				shared++
				tok.Release()
			}
		}()
	}
	wg.Wait()
	require.Equal(e.t, goroutines*rounds, shared)

	// Permits added by TryRelease and retired by Forget carry the ordering
	// too: a message goes out through one semaphore and the
	// acknowledgement comes back through another.
	out := e.new(0, 1)
	back := e.new(0, 1)
	msg := 0 // guarded by out and back alone
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range rounds {
			tok, err := out.Acquire(stuck, 1)
			if err != nil {
				e.t.Error(err)
				return
			}
			if msg != i {
				e.t.Errorf("read %d, want %d", msg, i)
			}
			msg = -1
			tok.Forget()
			if !back.TryRelease(1) {
				e.t.Error("acknowledgement refused")
				return
			}
		}
	}()
	for i := range rounds {
		msg = i
		require.True(e.t, out.TryRelease(1))
		tok, err := back.Acquire(stuck, 1)
		require.NoError(e.t, err)
		require.Equal(e.t, -1, msg)
		tok.Forget()
	}
	<-done
}
