package keyed_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/keyed"
	"github.com/atomicsem/atomicsem/overload"
	"github.com/atomicsem/atomicsem/token"
)

var twoClasses = []overload.Class{{Name: "critical", Share: 0.5}, {Name: "sheddable", MaxShare: 0.5}}

// TestGatesAnswerAsAGate checks that the same bad input gets from Gates the
// error overload.Gate gives it (the same sentinel, in keyed's words), and
// that a refused request makes no key.
func TestGatesAnswerAsAGate(t *testing.T) {
	newTests := []struct {
		name       string
		limit, max int64
		classes    []overload.Class
		opts       []overload.Option
	}{
		{"negative limit", -1, 4, twoClasses, nil},
		{"limit above max", 5, 4, twoClasses, nil},
		{"max above MaxPermits", 1, overload.MaxPermits(2) + 1, twoClasses, nil},
		{"no classes", 1, 1, nil, nil},
		{"five classes", 1, 1, make([]overload.Class, 5), nil},
		{"a class without a name", 1, 1, []overload.Class{{Name: ""}}, nil},
		{"shares above 1", 1, 1, []overload.Class{{Name: "a", Share: 0.6}, {Name: "b", Share: 0.6}}, nil},
		{"NaN share", 1, 1, []overload.Class{{Name: "a", Share: math.NaN()}}, nil},
		{"negative max queue", 1, 1, twoClasses, []overload.Option{overload.WithMaxQueue(-1)}},
		{"negative max wait", 1, 1, twoClasses, []overload.Option{overload.WithMaxWait(-time.Second)}},
	}
	for _, tt := range newTests {
		t.Run(tt.name, func(t *testing.T) {
			_, want := overload.New(tt.limit, tt.max, tt.classes, tt.opts...)
			require.Error(t, want)
			_, got := keyed.NewGates(tt.limit, tt.classes, keyed.WithMaxLimit(tt.max), keyed.WithGateOptions(tt.opts...))
			require.Error(t, got)
			for _, e := range []error{overload.ErrInvalidPermits, overload.ErrInvalidClasses, overload.ErrInvalidOption} {
				require.Equal(t, errors.Is(want, e), errors.Is(got, e), "%v vs %v", got, want)
			}
			require.True(t, strings.HasPrefix(got.Error(), "keyed: "), "%q", got)
		})
	}
	_, err := keyed.NewGates(1, twoClasses, keyed.WithMaxKeys(0))
	require.ErrorIs(t, err, keyed.ErrInvalidMaxKeys)

	g := overload.MustNew(4, 8, twoClasses)
	s := keyed.MustNewGates(4, twoClasses, keyed.WithMaxLimit(8))
	// A request that fits the maximum but not the limit waits until its
	// deadline on both: a millisecond for it, and for the others a deadline
	// that no stall of a loaded machine reaches, so that the valid request
	// of 0 makes its key.
	for _, rq := range []struct {
		c    int
		n    int64
		wait bool
	}{{0, -1, false}, {1, 5, false}, {0, 9, false}, {0, overload.MaxPermits(2) + 1, false}, {1, 0, false}, {0, 8, true}} {
		d := time.Minute
		if rq.wait {
			d = time.Millisecond
		}
		ctx, cancel := context.WithTimeout(context.Background(), d)
		gtok, want := g.Acquire(ctx, rq.c, rq.n)
		tok, got := s.Acquire(ctx, "k", rq.c, rq.n)
		cancel()
		for _, e := range []error{overload.ErrInvalidPermits, overload.ErrExceedsMax, context.DeadlineExceeded} {
			require.Equal(t, errors.Is(want, e), errors.Is(got, e), "Acquire(%d, %d): %v vs %v", rq.c, rq.n, got, want)
		}
		if got != nil && !errors.Is(got, context.DeadlineExceeded) {
			require.True(t, strings.HasPrefix(got.Error(), "keyed: "), "%q", got)
		}
		if want == nil {
			gtok.Release()
		}
		if got == nil {
			tok.Release()
		}
		gtok, wantOK := g.TryAcquire(rq.c, rq.n)
		tok, gotOK := s.TryAcquire("k2", rq.c, rq.n)
		require.Equal(t, wantOK, gotOK, "TryAcquire(%d, %d)", rq.c, rq.n)
		if wantOK {
			gtok.Release()
		}
		if gotOK {
			tok.Release()
		}
	}
	for _, l := range []int64{-1, 9} {
		want, got := g.SetLimit(l), s.SetLimit(l)
		require.Equal(t, errors.Is(want, overload.ErrInvalidPermits), errors.Is(got, overload.ErrInvalidPermits))
		require.Equal(t, errors.Is(want, overload.ErrExceedsMax), errors.Is(got, overload.ErrExceedsMax))
		require.ErrorIs(t, s.SetKeyLimit("k", l), errors.Unwrap(got))
	}
	require.Equal(t, 2, s.Len(), "only the valid requests made keys")
	require.Equal(t, 2, s.Classes())
	c, ok := s.Class("SHEDDABLE")
	require.True(t, ok)
	require.Equal(t, 1, c)
}

// TestGatesCapNeverDropsAKeyInUse fills a table with keys in use (a permit
// held, a waiter, a limit of its own, a limit lowered by Forget, a class in
// the overload mode, an estimate of the wait): a new key is refused, and
// every key keeps its state; as each is given back, a new key takes its
// place.
func TestGatesCapNeverDropsAKeyInUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const target, interval = time.Millisecond, 10 * time.Millisecond
		s := keyed.MustNewGates(1, twoClasses, keyed.WithMaxKeys(5), keyed.WithMaxLimit(2),
			keyed.WithGateOptions(overload.WithCoDel(target, interval)))
		ctx := context.Background()
		refusedNow := func(what string) {
			t.Helper()
			_, ok := s.TryAcquire("new-"+what, 0, 1)
			require.False(t, ok, "%s: a new key at the cap", what)
			_, err := s.Acquire(ctx, "new-"+what, 0, 1)
			require.ErrorIs(t, err, keyed.ErrTooManyKeys, what)
			require.ErrorIs(t, s.SetKeyLimit("new-"+what, 1), keyed.ErrTooManyKeys, what)
			require.Equal(t, 5, s.Len())
		}

		held, ok := s.TryAcquire("held", 1, 1)
		require.True(t, ok)
		blocker, ok := s.TryAcquire("waited", 0, 1)
		require.True(t, ok)
		waiter := make(chan error, 1)
		go func() {
			tok, err := s.Acquire(ctx, "waited", 0, 1)
			tok.Release()
			waiter <- err
		}()
		synctest.Wait()
		require.NoError(t, s.SetKeyLimit("own", 1))
		forgot, ok := s.TryAcquire("forgotten", 0, 1)
		require.True(t, ok)
		forgot.Forget()
		// A standing queue for more than an interval: the overload mode.
		tok, ok := s.TryAcquire("overloaded", 0, 1)
		require.True(t, ok)
		var ws []chan *token.Token
		for range 3 {
			w := make(chan *token.Token, 1)
			go func() {
				got, err := s.Acquire(ctx, "overloaded", 0, 1)
				if err != nil {
					w <- nil // dropped by the overload mode
					return
				}
				w <- &got
			}()
			ws = append(ws, w)
			time.Sleep(8 * time.Millisecond)
		}
		tok.Release()
		synctest.Wait()
		for _, w := range ws {
			if got := <-w; got != nil {
				got.Release()
			}
		}
		synctest.Wait()
		st, _ := s.KeyStats("overloaded")
		require.True(t, st.Classes[0].Overloaded, "the key's class 0 is in the overload mode")
		require.Zero(t, st.Held)

		refusedNow("full")
		require.Zero(t, s.Sweep(), "Sweep drops no key in use")
		refusedNow("after Sweep")

		// Each key given back makes room for one new key.
		held.Release()
		_, ok = s.TryAcquire("new-1", 0, 1)
		require.True(t, ok, "after a release")
		blocker.Release()
		require.NoError(t, <-waiter)
		tok2, ok := s.TryAcquire("new-2", 0, 1)
		require.True(t, ok, "after the waiter's release")
		defer tok2.Release()
		s.ResetKeyLimit("own")
		_, ok = s.TryAcquire("new-3", 0, 1)
		require.True(t, ok, "after ResetKeyLimit")
		refusedNow("forgotten and overloaded")
		require.NoError(t, s.SetKeyLimit("forgotten", 1))
		s.ResetKeyLimit("forgotten")
		_, ok = s.TryAcquire("new-4", 0, 1)
		require.True(t, ok, "after the forgotten permit's limit came back")
		refusedNow("overloaded")
		time.Sleep(4 * interval) // the overload mode's shed hold (see overload.Gate)
		_, ok = s.TryAcquire("new-5", 0, 1)
		require.True(t, ok, "after the overload mode ran out")
		_, present := s.KeyStats("overloaded")
		require.False(t, present)
	})
}

// TestGatesSweepDropsOnlyIdleGates checks that Sweep drops a gate once it
// is idle and not before: after its last permit comes back, and, for a gate
// that has learnt the pace of its queue, once it has forgotten it.
func TestGatesSweepDropsOnlyIdleGates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := keyed.MustNewGates(1, twoClasses)
		ctx := context.Background()
		for i := range 10 {
			tok, err := s.Acquire(ctx, fmt.Sprint("one-off-", i), i%2, 1)
			require.NoError(t, err)
			tok.Release()
		}
		// A key whose queue granted waiters in a row: it has an estimate.
		first, err := s.Acquire(ctx, "paced", 0, 1)
		require.NoError(t, err)
		tok := &first
		var ws []chan *token.Token
		for range 3 {
			w := make(chan *token.Token, 1)
			go func() {
				got, _ := s.Acquire(ctx, "paced", 0, 1)
				w <- &got
			}()
			ws = append(ws, w)
			synctest.Wait() // queued in this order
		}
		for _, w := range ws {
			time.Sleep(time.Millisecond)
			tok.Release()
			tok = <-w
		}
		held, err := s.Acquire(ctx, "held", 1, 1)
		require.NoError(t, err)
		require.Equal(t, 12, s.Len())
		require.Equal(t, 10, s.Sweep(), "the one-off keys")
		tok.Release()
		require.Zero(t, s.Sweep(), "the paced key keeps its estimate")
		time.Sleep(overload.EstimateMemory)
		require.Equal(t, 1, s.Sweep(), "the paced key, its estimate forgotten")
		held.Release()
		require.Equal(t, 1, s.Sweep())
		require.Zero(t, s.Len())
		require.NoError(t, keyed.CheckGatesIndex(s))
	})
}

// TestGatesConcurrentUse runs acquires, releases, limit changes and Sweeps
// of many keys at once (run it with -race), and checks that no key's gate
// ever holds more than its limit and that everything comes back.
func TestGatesConcurrentUse(t *testing.T) {
	const limit = 3
	s := keyed.MustNewGates(limit, twoClasses, keyed.WithMaxKeys(6), keyed.WithMaxLimit(limit))
	var wg sync.WaitGroup
	var held [8][2]int64
	var mu sync.Mutex
	for w := range 8 {
		wg.Go(func() {
			ctx := context.Background()
			for i := range 300 {
				k := (w + i) % 8
				key := fmt.Sprint("k", k)
				c := i % 2
				var tok token.Token
				var err error
				if i%3 == 0 {
					var ok bool
					if tok, ok = s.TryAcquire(key, c, 1); !ok {
						continue
					}
				} else {
					cctx, cancel := context.WithTimeout(ctx, time.Millisecond)
					tok, err = s.Acquire(cctx, key, c, 1)
					cancel()
					if err != nil {
						if !errors.Is(err, keyed.ErrTooManyKeys) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, overload.ErrShed) {
							t.Errorf("Acquire: %v", err)
						}
						continue
					}
				}
				mu.Lock()
				held[k][c]++
				if h := held[k][0] + held[k][1]; h > limit {
					t.Errorf("key %s: %d held, limit %d", key, h, limit)
				}
				mu.Unlock()
				if i%50 == 0 {
					s.Sweep()
				}
				mu.Lock()
				held[k][c]--
				mu.Unlock()
				tok.Release()
			}
		})
	}
	wg.Go(func() {
		for i := range 100 {
			_ = s.SetLimit(int64(1 + i%limit))
		}
		_ = s.SetLimit(limit)
	})
	wg.Wait()
	s.Sweep() // keys whose gate keeps an estimate of the wait stay
	require.LessOrEqual(t, s.Len(), 6)
	for k := range 8 {
		st, _ := s.KeyStats(fmt.Sprint("k", k))
		require.Zero(t, st.Held, "key k%d", k)
		require.Zero(t, st.Waiters, "key k%d", k)
		require.Equal(t, int64(limit), st.Limit, "key k%d", k)
	}
	require.NoError(t, keyed.CheckGatesIndex(s))
}
