package overload_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/overload"
	"github.com/atomicsem/atomicsem/token"
)

// pending is an Acquire running in its own goroutine.
type pending struct {
	done chan struct{}
	tok  token.Token
	err  error
}

// start begins an Acquire of n permits of class c and waits until it has
// either finished or parked (the test runs in a synctest bubble).
func start(t *testing.T, ctx context.Context, g *overload.Gate, c int, n int64) *pending {
	t.Helper()
	p := &pending{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.tok, p.err = g.Acquire(ctx, c, n)
	}()
	synctest.Wait()
	return p
}

// finished reports whether the Acquire has returned, after letting every
// goroutine of the bubble run.
func (p *pending) finished() bool {
	synctest.Wait()
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// granted requires that the Acquire returned a token, and returns it.
func (p *pending) granted(t *testing.T) *token.Token {
	t.Helper()
	require.True(t, p.finished(), "the Acquire still waits")
	require.NoError(t, p.err)
	return &p.tok
}

// refused requires that the Acquire failed with err.
func (p *pending) refused(t *testing.T, err error) {
	t.Helper()
	require.True(t, p.finished(), "the Acquire still waits")
	require.ErrorIs(t, p.err, err)
}

// waits requires that the Acquire still waits.
func (p *pending) waits(t *testing.T) {
	t.Helper()
	if p.finished() {
		t.Fatalf("the Acquire returned: %v", p.err)
	}
}

// take acquires n permits of class c at once, or fails the test.
func take(t *testing.T, g *overload.Gate, c int, n int64) *token.Token {
	t.Helper()
	tok, ok := g.TryAcquire(c, n)
	require.True(t, ok, "TryAcquire(%d, %d)", c, n)
	return &tok
}

// classes builds classes named c0, c1, … with the given shares.
func classes(shares ...float64) []overload.Class {
	out := make([]overload.Class, len(shares))
	for i, s := range shares {
		out[i] = overload.Class{Name: "c" + string(rune('0'+i)), Share: s}
	}
	return out
}

// heldBy returns the permits each class of g holds.
func heldBy(g *overload.Gate) []int64 {
	st := g.Stats()
	out := make([]int64, len(st.Classes))
	for i, c := range st.Classes {
		out[i] = c.Held
	}
	return out
}

// workers starts n goroutines that take one permit of class c, hold it for
// hold and ask again, until the function it returns is called; that
// function stops them and waits until they have returned. The workers
// start hold/n apart, so that no two of them release at the same instant
// of the bubble's clock: a release at the instant another worker has
// released but not yet asked again would find no critical waiter, and
// which runs first is up to the scheduler.
func workers(g *overload.Gate, c, n int, hold time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * hold / time.Duration(n))
			for ctx.Err() == nil {
				tok, err := g.Acquire(ctx, c, 1)
				if err != nil {
					return
				}
				time.Sleep(hold)
				tok.Release()
			}
		})
	}
	return func() {
		cancel()
		wg.Wait()
	}
}
