package group_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/group"
)

// TestLimitNeverExceededWhileSetLimitMoves runs 10 000 weighted functions
// from four goroutines while a fifth moves the limit up and down, and checks
// in every function that the permits the group's running functions hold
// never exceed the largest limit in force since that function's Go began
// (see limitLog for why that bound is exact).
func TestLimitNeverExceededWhileSetLimitMoves(t *testing.T) {
	const (
		tasks     = 10_000
		producers = 4
		ceiling   = 8
	)
	sem := newSem(t, 4, ceiling)
	limits := newLimitLog(sem)
	g := group.New(sem)

	var (
		running   gauge // permits held by running functions
		started   atomic.Int64
		violation atomic.Pointer[string]
	)
	var producing sync.WaitGroup
	for p := range producers {
		producing.Add(1)
		go func() {
			defer producing.Done()
			rng := rand.New(rand.NewPCG(uint64(p), 1))
			for range tasks / producers {
				weight := 1 + rng.Int64N(3)
				from := limits.mark()
				err := g.Go(background, weight, func() error {
					started.Add(1)
					now := running.add(weight)
					if bound := limits.maxSince(from); now > bound {
						msg := fmt.Sprintf("%d permits held by running functions, limit at most %d", now, bound)
						violation.CompareAndSwap(nil, &msg)
					}
					runtime.Gosched()
					running.add(-weight)
					return nil
				})
				if err != nil {
					msg := err.Error()
					violation.CompareAndSwap(nil, &msg)
					return
				}
			}
		}()
	}

	done := make(chan struct{})
	go func() {
		producing.Wait()
		close(done)
	}()
	rng := rand.New(rand.NewPCG(42, 42))
	for churning := true; churning; {
		select {
		case <-done:
			churning = false
		default:
			limits.set(t, rng.Int64N(ceiling+1))
			runtime.Gosched()
		}
		if limits.mark()%64 == 0 {
			limits.set(t, ceiling) // let waiters above low limits through now and then
		}
	}
	require.NoError(t, g.Wait())
	if msg := violation.Load(); msg != nil {
		t.Fatal(*msg)
	}
	require.EqualValues(t, tasks, started.Load())
	require.Greater(t, running.max.Load(), int64(1))
	requireIdle(t, sem)
}

// TestWeightedFunctionsShareTheLimit checks that functions of different
// weights run together only while their weights fit the limit.
func TestWeightedFunctionsShareTheLimit(t *testing.T) {
	sem := newSem(t, 5, 5)
	g := group.New(sem)
	release := make(chan struct{})
	hold := func() error { <-release; return nil }

	require.NoError(t, g.Go(background, 3, hold))
	require.False(t, g.TryGo(3, hold), "3 + 3 > 5")
	require.True(t, g.TryGo(2, hold), "3 + 2 = 5")
	require.False(t, g.TryGo(1, hold), "the limit is used up")
	require.EqualValues(t, 5, sem.Stats().Held)

	close(release)
	require.NoError(t, g.Wait())
	requireIdle(t, sem)
	require.True(t, g.TryGo(5, func() error { return nil }), "all 5 are back")
	require.NoError(t, g.Wait())
}

// TestGoWithZeroPermitsIsNotHeldBack checks that Go(ctx, 0, f) runs f even
// when the limit is 0, and that Wait waits for it.
func TestGoWithZeroPermitsIsNotHeldBack(t *testing.T) {
	sem := newSem(t, 0, 4)
	g := group.New(sem)
	var ran atomic.Bool
	require.NoError(t, g.Go(background, 0, func() error { ran.Store(true); return nil }))
	require.True(t, g.TryGo(0, func() error { return nil }))
	require.NoError(t, g.Wait())
	require.True(t, ran.Load())
	requireIdle(t, sem)
}

// TestGoRejectsBadRequestsAtOnce checks that Go fails at once, without
// calling f or changing the semaphore, for a request no limit could admit,
// and that the failure is the group's error.
func TestGoRejectsBadRequestsAtOnce(t *testing.T) {
	tests := []struct {
		name string
		n    int64
		want error
	}{
		{"negative", -1, atomicsem.ErrInvalidPermits},
		{"above the maximum", 5, atomicsem.ErrExceedsMax},
		{"above MaxPermits", atomicsem.MaxPermits + 1, atomicsem.ErrInvalidPermits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sem := newSem(t, 2, 4)
			before := sem.Stats()
			g, ctx := group.WithContext(background, sem)
			called := false
			err := g.Go(ctx, tt.n, func() error { called = true; return nil })
			require.ErrorIs(t, err, tt.want)
			require.False(t, called)
			require.Equal(t, before, sem.Stats())
			require.ErrorIs(t, context.Cause(ctx), tt.want, "the failure cancels the group")
			require.ErrorIs(t, g.Wait(), tt.want)
			require.False(t, g.TryGo(tt.n, func() error { return nil }))
		})
	}
}

// TestBlockedGoReturnsWhenItsContextIsDone checks that a Go waiting for
// permits gives up when its context expires, leaves the queue, and does not
// call f.
func TestBlockedGoReturnsWhenItsContextIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 1, 1)
		busy, _ := sem.TryAcquire(1)
		g := group.New(sem)
		ctx, cancel := context.WithTimeout(background, time.Second)
		defer cancel()

		start := time.Now()
		called := false
		err := g.Go(ctx, 1, func() error { called = true; return nil })
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, time.Second, time.Since(start))
		require.False(t, called)
		require.Zero(t, sem.Stats().Waiters)
		require.ErrorIs(t, g.Wait(), context.DeadlineExceeded)
		busy.Release()
		requireIdle(t, sem)
	})
}

// TestBlockedGoReturnsWhenTheGroupFails checks that a Go waiting for
// permits stops waiting when another function of the group fails, whether
// the caller passes the group's context or a context of its own, and that
// the group keeps the first error.
func TestBlockedGoReturnsWhenTheGroupFails(t *testing.T) {
	tests := []struct {
		name      string
		callerCtx func(groupCtx context.Context) context.Context
	}{
		{"the group's context", func(gctx context.Context) context.Context { return gctx }},
		{"the caller's own context", func(context.Context) context.Context { return background }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sem := newSem(t, 1, 1)
				g, gctx := group.WithContext(background, sem)
				fail := make(chan struct{})
				require.NoError(t, g.Go(gctx, 1, func() error { <-fail; return errBoom }))

				result := make(chan error)
				called := false
				go func() {
					result <- g.Go(tt.callerCtx(gctx), 1, func() error { called = true; return nil })
				}()
				synctest.Wait()
				require.Equal(t, 1, sem.Stats().Waiters, "the second Go waits")

				close(fail)
				require.ErrorIs(t, <-result, context.Canceled)
				require.False(t, called)
				require.ErrorIs(t, g.Wait(), errBoom)
				require.ErrorIs(t, context.Cause(gctx), errBoom)
				requireIdle(t, sem)
			})
		})
	}
}

// TestGoAfterTheGroupFailedStartsNothing checks that once a function has
// failed, Go and TryGo start nothing, even with permits free.
func TestGoAfterTheGroupFailedStartsNothing(t *testing.T) {
	sem := newSem(t, 4, 4)
	g, ctx := group.WithContext(background, sem)
	require.NoError(t, g.Go(ctx, 1, func() error { return errBoom }))
	<-ctx.Done()

	called := false
	f := func() error { called = true; return nil }
	require.ErrorIs(t, g.Go(background, 1, f), context.Canceled)
	require.ErrorIs(t, g.Go(ctx, 1, f), context.Canceled)
	require.False(t, g.TryGo(1, f))
	require.ErrorIs(t, g.Wait(), errBoom)
	require.False(t, called)
	requireIdle(t, sem)
}

// TestGoAfterTheParentContextIsDoneStartsNothing checks that a group whose
// parent context is cancelled starts nothing, and that Wait reports it even
// though no function failed.
func TestGoAfterTheParentContextIsDoneStartsNothing(t *testing.T) {
	sem := newSem(t, 4, 4)
	parent, cancel := context.WithCancel(background)
	g, ctx := group.WithContext(parent, sem)
	cancel()
	called := false
	f := func() error { called = true; return nil }
	require.False(t, g.TryGo(1, f))
	require.ErrorIs(t, g.Go(ctx, 1, f), context.Canceled)
	require.ErrorIs(t, g.Wait(), context.Canceled)
	require.False(t, called)
	requireIdle(t, sem)
}

// TestGroupIsReusableAfterWait checks that a group made by New runs
// functions again after Wait, as an errgroup.Group does, while one made by
// WithContext, whose context Wait cancels, starts nothing more.
func TestGroupIsReusableAfterWait(t *testing.T) {
	sem := newSem(t, 2, 2)
	nop := func() error { return nil }

	g := group.New(sem)
	for range 3 {
		require.NoError(t, g.Go(background, 1, nop))
		require.True(t, g.TryGo(1, nop))
		require.NoError(t, g.Wait())
	}

	gc, ctx := group.WithContext(background, sem)
	require.NoError(t, gc.Go(ctx, 1, nop))
	require.NoError(t, gc.Wait())
	require.ErrorIs(t, ctx.Err(), context.Canceled, "Wait cancels the group's context")
	require.False(t, gc.TryGo(1, nop))
	require.ErrorIs(t, gc.Go(background, 1, nop), context.Canceled)
	require.ErrorIs(t, gc.Wait(), context.Canceled)
	requireIdle(t, sem)
}

// TestWaitWaitsOnlyForTheGroupsOwnFunctions checks that Wait returns once
// the group's functions have, while permits taken elsewhere are still held.
func TestWaitWaitsOnlyForTheGroupsOwnFunctions(t *testing.T) {
	sem := newSem(t, 2, 2)
	other, ok := sem.TryAcquire(1)
	require.True(t, ok)
	g := group.New(sem)
	require.NoError(t, g.Go(background, 1, func() error { return nil }))
	require.NoError(t, g.Wait())
	require.EqualValues(t, 1, sem.Stats().Held, "the other holder keeps its permit")
	other.Release()
}

// TestGroupsSharingASemaphoreShareItsLimit checks that two groups on one
// semaphore draw from one budget: a Go of the second waits for a function
// of the first to return.
func TestGroupsSharingASemaphoreShareItsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 2, 2)
		g1, g2 := group.New(sem), group.New(sem)
		release := make(chan struct{})
		hold := func() error { <-release; return nil }
		require.NoError(t, g1.Go(background, 1, hold))
		require.NoError(t, g1.Go(background, 1, hold))
		require.False(t, g2.TryGo(1, hold))

		var started atomic.Bool
		go func() {
			_ = g2.Go(background, 1, func() error { started.Store(true); return nil })
		}()
		synctest.Wait()
		require.False(t, started.Load(), "no permit is free")

		release <- struct{}{}
		synctest.Wait()
		require.True(t, started.Load(), "the first group's return admitted the second's Go")
		close(release)
		require.NoError(t, g1.Wait())
		require.NoError(t, g2.Wait())
		requireIdle(t, sem)
	})
}

// TestRaisingTheLimitStartsAWaitingGoAtOnce checks that SetLimit admits a
// waiting Go without any function returning.
func TestRaisingTheLimitStartsAWaitingGoAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 0, 4)
		g := group.New(sem)
		var started atomic.Bool
		go func() {
			_ = g.Go(background, 2, func() error { started.Store(true); return nil })
		}()
		synctest.Wait()
		require.False(t, started.Load())
		require.NoError(t, sem.SetLimit(1))
		synctest.Wait()
		require.False(t, started.Load(), "a limit of 1 does not admit 2 permits")
		require.NoError(t, sem.SetLimit(2))
		synctest.Wait()
		require.True(t, started.Load())
		require.NoError(t, g.Wait())
		requireIdle(t, sem)
	})
}

// TestLoweringTheLimitLetsRunningFunctionsFinish checks that lowering the
// limit below what running functions hold stops none of them, and holds a
// new Go back until the holders are under the new limit.
func TestLoweringTheLimitLetsRunningFunctionsFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 3, 3)
		g := group.New(sem)
		release := make(chan struct{})
		var finished atomic.Int64
		for range 3 {
			require.NoError(t, g.Go(background, 1, func() error {
				<-release
				finished.Add(1)
				return nil
			}))
		}
		require.NoError(t, sem.SetLimit(1))

		var started atomic.Bool
		go func() {
			_ = g.Go(background, 1, func() error { started.Store(true); return nil })
		}()
		for i := range 3 {
			synctest.Wait()
			require.False(t, started.Load(), "held %d of limit 1", 3-i)
			release <- struct{}{}
		}
		synctest.Wait()
		require.EqualValues(t, 3, finished.Load(), "every running function finished")
		require.True(t, started.Load())
		require.NoError(t, g.Wait())
		requireIdle(t, sem)
	})
}

// TestWaitReturnsTheFirstError checks that Wait returns the error of the
// function that failed first, also after later failures, as errgroup's Wait
// does.
func TestWaitReturnsTheFirstError(t *testing.T) {
	sem := newSem(t, 4, 4)
	g := group.New(sem)
	errLater := errors.New("group_test: later")
	require.NoError(t, g.Go(background, 1, func() error { return errBoom }))
	require.ErrorIs(t, g.Wait(), errBoom)
	require.True(t, g.TryGo(1, func() error { return errLater }))
	require.ErrorIs(t, g.Wait(), errBoom)
}
