package etcdsem_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/etcdsem"
)

// Every entry point given a nil it cannot use panics at the call with a
// message that begins "etcdsem: " and names what was nil, before it talks
// to etcd.
func TestNilArgumentsPanicNamingThem(t *testing.T) {
	srv := startServer(t)
	h := newHandle(t, srv, prefixFor(t), 1, 1, handleOpts{})
	var nilSem *etcdsem.Semaphore
	var nilCtx context.Context
	ctx := context.Background()
	tests := []struct {
		name string
		want string // in the panic's message, after the prefix
		call func()
	}{
		{"New with a nil context", "nil context", func() { etcdsem.New(nilCtx, h.session, "/x", 1, 1) }},
		{"New with a nil session", "nil session", func() { etcdsem.New(ctx, nil, "/x", 1, 1) }},
		{"New with a nil Option", "nil Option", func() { etcdsem.New(ctx, h.session, "/x", 1, 1, nil) }},
	}
	methods := []struct {
		name string
		call func(s *etcdsem.Semaphore, ctx context.Context)
	}{
		{"Acquire", func(s *etcdsem.Semaphore, ctx context.Context) { s.Acquire(ctx, 1) }},
		{"AcquireFenced", func(s *etcdsem.Semaphore, ctx context.Context) { s.AcquireFenced(ctx, 1) }},
		{"TryAcquire", func(s *etcdsem.Semaphore, ctx context.Context) { s.TryAcquire(ctx, 1) }},
		{"TryRelease", func(s *etcdsem.Semaphore, ctx context.Context) { s.TryRelease(ctx, 1) }},
		{"Refill", func(s *etcdsem.Semaphore, ctx context.Context) { s.Refill(ctx, 1) }},
		{"SetLimit", func(s *etcdsem.Semaphore, ctx context.Context) { s.SetLimit(ctx, 1) }},
		{"Close", func(s *etcdsem.Semaphore, ctx context.Context) { s.Close(ctx) }},
		{"TryForget", func(s *etcdsem.Semaphore, ctx context.Context) { s.TryForget(ctx, 1) }},
		{"Stats", func(s *etcdsem.Semaphore, ctx context.Context) { s.Stats(ctx) }},
		{"WaitIdle", func(s *etcdsem.Semaphore, ctx context.Context) { s.WaitIdle(ctx) }},
		{"Parked", func(s *etcdsem.Semaphore, ctx context.Context) { s.Parked(ctx) }},
	}
	for _, m := range methods {
		tests = append(tests,
			struct {
				name string
				want string
				call func()
			}{m.name + " on a nil Semaphore", m.name + " on a nil *Semaphore", func() { m.call(nilSem, ctx) }},
			struct {
				name string
				want string
				call func()
			}{m.name + " with a nil context", m.name + " with a nil context", func() { m.call(h.Semaphore, nilCtx) }},
		)
	}
	for _, name := range []string{"Prefix", "Max", "Done", "Err"} {
		call := map[string]func(){
			"Prefix": func() { nilSem.Prefix() },
			"Max":    func() { nilSem.Max() },
			"Done":   func() { nilSem.Done() },
			"Err":    func() { nilSem.Err() },
		}[name]
		tests = append(tests, struct {
			name string
			want string
			call func()
		}{name + " on a nil Semaphore", name + " on a nil *Semaphore", call})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := panicMessage(tt.call)
			require.True(t, strings.HasPrefix(msg, "etcdsem: "), "panic %q", msg)
			require.Contains(t, msg, tt.want)
		})
	}
	require.Equal(t, etcdsem.Stats{Available: 1, Limit: 1, Max: 1}, mustStats(t, h.Semaphore), "a refused call changed the semaphore")
	require.Empty(t, keys(t, h.cli, "/x/"), "a refused New wrote")
}

// panicMessage runs f and returns what it panicked with, as text; "" if
// it returned.
func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// A semaphore reads every key under its prefix, so one nested inside
// another would break both. New refuses a prefix inside an existing
// semaphore's and one that contains an existing semaphore, and writes
// nothing; the existing semaphore goes on working, and prefixes that only
// share a beginning are not nested.
func TestNestedPrefixesAreRefusedBothWays(t *testing.T) {
	srv := startServer(t)
	parent := newHandle(t, srv, "/nest/reindex", 1, 1, handleOpts{})
	child := newHandle(t, srv, "/nest/other/sub", 1, 1, handleOpts{})
	ctx := testCtx(t)
	tests := []struct {
		name   string
		prefix string
		want   error
	}{
		{"inside", "/nest/reindex/sub", etcdsem.ErrNestedPrefix},
		{"inside, deeper", "/nest/reindex/a/b/", etcdsem.ErrNestedPrefix},
		{"inside its key directory", "/nest/reindex/k/", etcdsem.ErrNestedPrefix},
		{"containing", "/nest/other", etcdsem.ErrNestedPrefix},
		{"containing, higher", "/nest/", etcdsem.ErrNestedPrefix},
		{"sharing a beginning", "/nest/reindexer", nil},
		{"the same", "/nest/reindex/", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := etcdsem.New(ctx, parent.session, tt.prefix, 1, 1)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
			t.Logf("%v", err)
		})
	}
	require.Len(t, keys(t, parent.cli, "/nest/reindex/sub/"), 0)
	for _, h := range []*handle{parent, child} {
		tok, err := h.Acquire(ctx, 1)
		require.NoError(t, err, "the existing semaphore broke")
		require.Equal(t, etcdsem.Stats{Held: 1, Limit: 1, Max: 1}, mustStats(t, h.Semaphore))
		tok.Release()
	}
}
