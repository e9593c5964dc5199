package group_test

// The tests of golang.org/x/sync/errgroup (v0.19.0) that apply to a group
// on a semaphore, ported. docs/group.md lists where the two differ by
// design.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/group"
)

// TestNewGroupReturnsTheFirstError is errgroup's TestZeroGroup. The zero
// Group is not usable here (it has no semaphore), so the group comes from
// New, which like errgroup's zero Group has no context to cancel.
func TestNewGroupReturnsTheFirstError(t *testing.T) {
	err1 := errors.New("group_test: 1")
	err2 := errors.New("group_test: 2")

	tests := []struct {
		errs []error
	}{
		{errs: []error{}},
		{errs: []error{nil}},
		{errs: []error{err1}},
		{errs: []error{err1, nil}},
		{errs: []error{err1, nil, err2}},
	}
	for _, tt := range tests {
		g := group.New(newSem(t, 1, 1))

		var firstErr error
		for i, err := range tt.errs {
			require.NoError(t, g.Go(background, 1, func() error { return err }))
			if firstErr == nil && err != nil {
				firstErr = err
			}
			require.Equal(t, firstErr, g.Wait(), "after Go of %v", tt.errs[:i+1])
		}
	}
}

// TestWithContext is errgroup's TestWithContext: Wait returns the first
// error, and the group's context is done once Wait returns.
func TestWithContext(t *testing.T) {
	errDoom := errors.New("group_test: doomed")

	tests := []struct {
		errs []error
		want error
	}{
		{want: nil},
		{errs: []error{nil}, want: nil},
		{errs: []error{errDoom}, want: errDoom},
		{errs: []error{errDoom, nil}, want: errDoom},
	}
	for _, tt := range tests {
		g, ctx := group.WithContext(background, newSem(t, 4, 4))
		for _, err := range tt.errs {
			// A Go after the first error may be refused (the group is
			// done); either way Wait reports the first error.
			_ = g.Go(ctx, 1, func() error { return err })
		}
		require.Equal(t, tt.want, g.Wait(), "errs %v", tt.errs)
		select {
		case <-ctx.Done():
		default:
			t.Errorf("errs %v: ctx.Done() was not closed after Wait", tt.errs)
		}
	}
}

// TestTryGo is errgroup's TestTryGo. errgroup's SetLimit may only change
// while no goroutine is active; here the limit is the semaphore's and moves
// at any time, so the switches happen both between and during runs.
func TestTryGo(t *testing.T) {
	const n = 42
	sem := newSem(t, n, n)
	g := group.New(sem)
	ch := make(chan struct{})
	fn := func() error {
		ch <- struct{}{}
		return nil
	}
	for i := range n {
		require.True(t, g.TryGo(1, fn), "TryGo %d of %d", i+1, n)
	}
	require.False(t, g.TryGo(1, fn), "TryGo beyond the limit")
	go func() {
		for range n {
			<-ch
		}
	}()
	require.NoError(t, g.Wait())

	require.True(t, g.TryGo(1, fn), "TryGo after every function returned")
	go func() { <-ch }()
	require.NoError(t, g.Wait())

	// Switch the limit.
	require.NoError(t, sem.SetLimit(1))
	require.True(t, g.TryGo(1, fn))
	require.False(t, g.TryGo(1, fn))
	// Switch it while a function runs: raising it admits one more.
	require.NoError(t, sem.SetLimit(2))
	require.True(t, g.TryGo(1, fn))
	go func() { <-ch; <-ch }()
	require.NoError(t, g.Wait())

	// Block all calls.
	require.NoError(t, sem.SetLimit(0))
	for range 1 << 10 {
		require.False(t, g.TryGo(1, fn))
	}
	require.NoError(t, g.Wait())
}

// TestGoLimit is errgroup's TestGoLimit: no more functions run at once than
// the limit. errgroup's functions sleep a microsecond to let others start;
// these yield instead, which needs no clock.
func TestGoLimit(t *testing.T) {
	const limit = 10
	g := group.New(newSem(t, limit, limit))
	var active atomic.Int32
	for range 1<<10 + 1 {
		require.NoError(t, g.Go(background, 1, func() error {
			n := active.Add(1)
			if n > limit {
				return fmt.Errorf("saw %d active functions; want ≤ %d", n, limit)
			}
			yield()
			active.Add(-1)
			return nil
		}))
	}
	require.NoError(t, g.Wait())
}

// TestCancelCause is errgroup's TestCancelCause: the group's context is
// cancelled with the first error as its cause, or with context.Canceled
// when Wait returns without one.
func TestCancelCause(t *testing.T) {
	errDoom := errors.New("group_test: doomed")

	tests := []struct {
		errs []error
		want error
	}{
		{want: nil},
		{errs: []error{nil}, want: nil},
		{errs: []error{errDoom}, want: errDoom},
		{errs: []error{errDoom, nil}, want: errDoom},
	}
	for _, tt := range tests {
		g, ctx := group.WithContext(context.Background(), newSem(t, 4, 4))
		for _, err := range tt.errs {
			g.TryGo(1, func() error { return err })
		}
		require.Equal(t, tt.want, g.Wait(), "errs %v", tt.errs)
		want := tt.want
		if want == nil {
			want = context.Canceled
		}
		require.Equal(t, want, context.Cause(ctx), "errs %v", tt.errs)
	}
}
