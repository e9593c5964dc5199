package group_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/group"
)

// TestMisuseIsAPrefixedPanic checks every caller bug the package rejects:
// each panics with a message that begins "group: ", before the call changes
// anything, so the group and the semaphore are as they were.
func TestMisuseIsAPrefixedPanic(t *testing.T) {
	nop := func() error { return nil }
	double := func(_ context.Context, x int) (int, error) { return 2 * x, nil }
	tests := []struct {
		name string
		call func(g *group.Group, sem *atomicsem.Semaphore)
	}{
		{"New with a nil semaphore", func(*group.Group, *atomicsem.Semaphore) { group.New(nil) }},
		{"WithContext with a nil context", func(_ *group.Group, sem *atomicsem.Semaphore) {
			group.WithContext(nil, sem) //lint:ignore SA1012 the nil context is the point
		}},
		{"WithContext with a nil semaphore", func(*group.Group, *atomicsem.Semaphore) { group.WithContext(background, nil) }},
		{"Go with a nil context", func(g *group.Group, _ *atomicsem.Semaphore) {
			_ = g.Go(nil, 1, nop) //lint:ignore SA1012 the nil context is the point
		}},
		{"Go with a nil function", func(g *group.Group, _ *atomicsem.Semaphore) { _ = g.Go(background, 1, nil) }},
		{"TryGo with a nil function", func(g *group.Group, _ *atomicsem.Semaphore) { g.TryGo(1, nil) }},
		{"Go on the zero Group", func(*group.Group, *atomicsem.Semaphore) { _ = new(group.Group).Go(background, 1, nop) }},
		{"TryGo on the zero Group", func(*group.Group, *atomicsem.Semaphore) { new(group.Group).TryGo(1, nop) }},
		{"Go on a nil *Group", func(*group.Group, *atomicsem.Semaphore) { _ = (*group.Group)(nil).Go(background, 1, nop) }},
		{"TryGo on a nil *Group", func(*group.Group, *atomicsem.Semaphore) { (*group.Group)(nil).TryGo(1, nop) }},
		{"Wait on a nil *Group", func(*group.Group, *atomicsem.Semaphore) { _ = (*group.Group)(nil).Wait() }},
		{"Map with a nil context", func(_ *group.Group, sem *atomicsem.Semaphore) {
			_, _ = group.Map(nil, sem, []int{1}, double) //lint:ignore SA1012 the nil context is the point
		}},
		{"Map with a nil semaphore", func(*group.Group, *atomicsem.Semaphore) { _, _ = group.Map(background, nil, []int{1}, double) }},
		{"Map with a nil function", func(_ *group.Group, sem *atomicsem.Semaphore) {
			_, _ = group.Map[int, int](background, sem, []int{1}, nil)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sem := newSem(t, 2, 2)
			g, ctx := group.WithContext(background, sem)
			before := sem.Stats()
			requireGroupPanic(t, func() { tt.call(g, sem) })
			require.Equal(t, before, sem.Stats())
			require.NoError(t, ctx.Err(), "a rejected call does not fail the group")
			require.NoError(t, g.Wait())
		})
	}
}

// TestZeroGroupWaitReturnsNil checks the one thing the zero Group does.
func TestZeroGroupWaitReturnsNil(t *testing.T) {
	var g group.Group
	require.NoError(t, g.Wait())
}

// TestClosedSemaphoreStartsNothing checks that Go fails with ErrClosed and
// records it, TryGo refuses, and Map fails, once the semaphore is closed;
// and that a Go waiting when it closes gets ErrClosed too.
func TestClosedSemaphoreStartsNothing(t *testing.T) {
	sem := newSem(t, 1, 1)
	g := group.New(sem)
	release := make(chan struct{})
	require.NoError(t, g.Go(background, 1, func() error { <-release; return nil }))
	waiting := make(chan error)
	go func() { waiting <- g.Go(background, 1, func() error { return nil }) }()
	for sem.Stats().Waiters == 0 {
		yield()
	}
	sem.Close()
	require.ErrorIs(t, <-waiting, atomicsem.ErrClosed)
	close(release)

	called := false
	require.ErrorIs(t, g.Go(background, 1, func() error { called = true; return nil }), atomicsem.ErrClosed)
	require.False(t, g.TryGo(1, func() error { called = true; return nil }))
	require.ErrorIs(t, g.Wait(), atomicsem.ErrClosed)
	require.False(t, called)

	_, err := group.Map(background, sem, []int{1, 2}, func(_ context.Context, x int) (int, error) {
		called = true
		return x, nil
	})
	require.ErrorIs(t, err, atomicsem.ErrClosed)
	require.False(t, called)
	require.Zero(t, sem.Stats().Held)
}
