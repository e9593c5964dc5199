package keyed_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/keyed"
	"github.com/atomicsem/atomicsem/overload"
)

// TestMisusePanicsWithPrefix checks that each provable caller bug panics
// with a message that begins "keyed: ", and leaves the tables unchanged.
func TestMisusePanicsWithPrefix(t *testing.T) {
	l, err := keyed.NewLimiter(1, 2)
	require.NoError(t, err)
	s, err := keyed.NewSemaphores(2)
	require.NoError(t, err)
	var nilL *keyed.Limiter
	var nilS *keyed.Semaphores
	gs := keyed.MustNewGates(2, twoClasses)
	var nilG *keyed.Gates
	var nilCtx context.Context
	tests := []struct {
		name string
		f    func()
	}{
		{"Limiter.Spend nil ctx", func() { _ = l.Spend(nilCtx, "k", 1) }},
		{"Limiter.Acquire nil ctx", func() { _, _ = l.Acquire(nilCtx, "k", 1) }},
		{"Semaphores.Acquire nil ctx", func() { _, _ = s.Acquire(nilCtx, "k", 1) }},
		{"nil Limiter TrySpend", func() { nilL.TrySpend("k", 1) }},
		{"nil Limiter Spend", func() { _ = nilL.Spend(context.Background(), "k", 1) }},
		{"nil Limiter Take", func() { _, _ = nilL.Take("k", 1) }},
		{"nil Limiter Len", func() { nilL.Len() }},
		{"nil Semaphores TryAcquire", func() { nilS.TryAcquire("k", 1) }},
		{"nil Semaphores Acquire", func() { _, _ = nilS.Acquire(context.Background(), "k", 1) }},
		{"nil Semaphores SetLimit", func() { _ = nilS.SetLimit(1) }},
		{"nil Semaphores Sweep", func() { nilS.Sweep() }},
		{"Middleware nil Limiter", func() { keyed.Middleware(nil) }},
		{"Middleware nil handler", func() { keyed.Middleware(l)(nil) }},
		{"Middleware nil option", func() { keyed.Middleware(l, nil) }},
		{"WithKeyFunc nil", func() { keyed.WithKeyFunc(nil) }},
		{"WithRejection nil", func() { keyed.WithRejection(nil) }},
		{"WithIPv6Prefix 129", func() { keyed.WithIPv6Prefix(129) }},
		{"WithIPv6Prefix -1", func() { keyed.WithIPv6Prefix(-1) }},
		{"NewLimiter nil option", func() { _, _ = keyed.NewLimiter(1, 1, nil) }},
		{"NewLimiter nil option after one", func() { _, _ = keyed.NewLimiter(1, 1, keyed.WithMaxKeys(3), nil) }},
		{"NewSemaphores nil option", func() { _, _ = keyed.NewSemaphores(1, nil) }},
		{"MustNewSemaphores nil option", func() { keyed.MustNewSemaphores(1, nil) }},
		{"Rejected nil", func() { _ = keyed.Rejected(nil) }},
		{"zero Limiter TrySpend", func() { new(keyed.Limiter).TrySpend("k", 1) }},
		{"zero Limiter Take", func() { _, _ = new(keyed.Limiter).Take("k", 1) }},
		{"zero Limiter Balance", func() { new(keyed.Limiter).Balance("k") }},
		{"zero Semaphores TryAcquire", func() { new(keyed.Semaphores).TryAcquire("k", 1) }},
		{"zero Semaphores Acquire", func() { _, _ = new(keyed.Semaphores).Acquire(context.Background(), "k", 1) }},
		{"zero Semaphores KeyStats", func() { new(keyed.Semaphores).KeyStats("k") }},
		{"Gates.Acquire nil ctx", func() { _, _ = gs.Acquire(nilCtx, "k", 0, 1) }},
		{"Gates.Acquire class -1", func() { _, _ = gs.Acquire(context.Background(), "k", -1, 1) }},
		{"Gates.Acquire class 2", func() { _, _ = gs.Acquire(context.Background(), "k", 2, 1) }},
		{"Gates.TryAcquire class 2", func() { gs.TryAcquire("k", 2, 1) }},
		{"nil Gates TryAcquire", func() { nilG.TryAcquire("k", 0, 1) }},
		{"nil Gates Sweep", func() { nilG.Sweep() }},
		{"zero Gates Acquire", func() { _, _ = new(keyed.Gates).Acquire(context.Background(), "k", 0, 1) }},
		{"zero Gates KeyStats", func() { new(keyed.Gates).KeyStats("k") }},
		{"NewGates nil option", func() { _, _ = keyed.NewGates(1, twoClasses, nil) }},
		{"WithGateOptions nil", func() { keyed.WithGateOptions(overload.WithMaxQueue(1), nil) }},
		{"GatesMiddleware nil Gates", func() { keyed.GatesMiddleware(nil) }},
		{"GatesMiddleware nil option", func() { keyed.GatesMiddleware(gs, nil) }},
		{"GatesMiddleware nil handler", func() { keyed.GatesMiddleware(gs)(nil) }},
		{"WithClassOptions nil", func() { keyed.WithClassOptions(nil) }},
		{"GatesMiddleware unknown default class", func() {
			keyed.GatesMiddleware(gs, keyed.WithClassOptions(overload.WithDefaultClass("nope")))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r, "no panic")
				require.True(t, strings.HasPrefix(fmt.Sprint(r), "keyed: "), "panic %q", r)
			}()
			tt.f()
		})
	}
	require.Zero(t, l.Len())
	require.Zero(t, s.Len())
	require.Zero(t, gs.Len())
}
