package atomicsem_test

// Acquire and TryAcquire one at a time: the accounting, requests for zero,
// done and expiring contexts, and a grant racing a cancellation. The order
// in which several waiters are served is in fairness_test.go.

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

func TestTryAcquireAccounting(t *testing.T) {
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
		want         atomicsem.Stats
	}{
		{"fills then refuses", 2, 2,
			[]step{try(1, true), try(1, true), try(1, false), rel(0), try(1, true)},
			atomicsem.Stats{Available: 0, Held: 2, Limit: 2, Max: 2}},
		{"weighted", 5, 5,
			[]step{try(3, true), try(3, false), try(2, true), try(1, false), rel(0), try(3, true)},
			atomicsem.Stats{Available: 0, Held: 5, Limit: 5, Max: 5}},
		{"release gives back the token's own weight", 4, 4,
			[]step{try(1, true), try(3, true), rel(1), try(3, true), try(1, false), rel(0), try(1, true)},
			atomicsem.Stats{Available: 0, Held: 4, Limit: 4, Max: 4}},
		{"zero fits in an empty semaphore", 0, 3,
			[]step{try(0, true), try(1, false), try(0, true)},
			atomicsem.Stats{Available: 0, Held: 0, Limit: 0, Max: 3}},
		{"limit below max bounds the take", 2, 4,
			[]step{try(3, false), try(2, true), try(1, false), rel(0), try(2, true)},
			atomicsem.Stats{Available: 0, Held: 2, Limit: 2, Max: 4}},
		{"all at once", 3, 3,
			[]step{try(3, true), try(1, false), rel(0), try(4, false), try(3, true)},
			atomicsem.Stats{Available: 0, Held: 3, Limit: 3, Max: 3}},
	}
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := mustNew(t, tt.initial, tt.max, opts...)
				var toks []*token.Token
				for i, st := range tt.steps {
					if st.release >= 0 {
						toks[st.release].Release()
						continue
					}
					tok, ok := s.TryAcquire(st.take)
					require.Equal(t, st.ok, ok, "step %d: TryAcquire(%d)", i, st.take)
					if ok {
						require.Equal(t, st.take, tok.Permits())
						toks = append(toks, &tok)
					} else {
						require.Zero(t, tok.Permits())
					}
				}
				require.Equal(t, tt.want, s.Stats())
			})
		}
	})
}

func TestTimedOutAcquireLeavesSemaphoreUnchanged(t *testing.T) {
	tests := []struct {
		name string
		n    int64
	}{
		{"waits for a release", 1},
		{"waits for the limit to rise", 3},
	}
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := mustNew(t, 2, 4, opts...)
					held := mustTake(t, s, 2)
					before := s.Stats()

					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
					defer cancel()
					start := time.Now()
					tok, err := s.Acquire(ctx, tt.n)
					require.Equal(t, context.DeadlineExceeded, err, "ctx.Err() must come back unwrapped")
					require.Equal(t, 10*time.Millisecond, time.Since(start))
					require.Zero(t, tok.Permits())
					require.Equal(t, before, s.Stats())

					held.Release()
					mustTake(t, s, 2).Release() // nothing leaked to the timed-out waiter
				})
			})
		}
	})
}

func TestDoneContextFailsEvenWithFreePermits(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
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
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := mustNew(t, 3, 3, opts...)
				before := s.Stats()
				tok, err := s.Acquire(tt.ctx, tt.n)
				require.Equal(t, tt.want, err, "ctx.Err() must come back unwrapped")
				require.Zero(t, tok.Permits())
				require.Equal(t, before, s.Stats())
			})
		}
	})
}

// TestAcquireZeroReturnsEmptyTokenAtOnce asks for nothing in every state
// where asking for something would wait: it must never wait.
func TestAcquireZeroReturnsEmptyTokenAtOnce(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, s *atomicsem.Semaphore) (cleanup func())
	}{
		{"empty", func(t *testing.T, s *atomicsem.Semaphore) func() { return func() {} }},
		{"in debt", func(t *testing.T, s *atomicsem.Semaphore) func() {
			require.True(t, s.TryRelease(2))
			held := mustTake(t, s, 2)
			require.NoError(t, s.SetLimit(0))
			return func() { held.Release() }
		}},
		{"behind a parked waiter", func(t *testing.T, s *atomicsem.Semaphore) func() {
			ctx, cancel := context.WithCancel(context.Background())
			p := park(t, s, ctx, 1)
			return func() {
				cancel()
				<-p.done
			}
		}},
	}
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := mustNew(t, 0, 4, opts...)
					cleanup := tt.setup(t, s)
					before := s.Stats()

					ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
					defer cancel()
					start := time.Now()
					tok, err := s.Acquire(ctx, 0)
					require.NoError(t, err)
					require.Zero(t, time.Since(start), "Acquire(0) waited")
					require.Zero(t, tok.Permits())
					require.Equal(t, before, s.Stats())
					tok.Release()
					require.Equal(t, before, s.Stats())

					try, ok := s.TryAcquire(0)
					require.True(t, ok)
					try.Forget()
					require.Equal(t, before, s.Stats(), "forgetting nothing must not move the limit")
					cleanup()
				})
			})
		}
	})
}

// TestGrantRacingCancelGivesPermitsBack cancels a parked waiter at about the
// moment a release serves it, many times. Whichever wins, the permit must
// end up with the waiter (which then releases it) or go on to the follower
// parked behind it; a leak shows as a follower that never returns or as
// Stats that do not come back to full. Barging runs twice: with the default
// bound, a slow machine makes the head starve and the release hands off;
// with a long bound, the release wakes the head to compete instead, and the
// cancellation races that wake-up.
func TestGrantRacingCancelGivesPermitsBack(t *testing.T) {
	const rounds = 1000
	modes := []struct {
		name string
		opts []atomicsem.Option
	}{
		{"mode=fifo", nil},
		{"mode=barging", []atomicsem.Option{atomicsem.WithBarging()}},
		{"mode=barging/bound=1h", []atomicsem.Option{atomicsem.WithBarging(), atomicsem.WithStarvationBound(time.Hour)}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			var granted, cancelled int
			for range rounds {
				s := mustNew(t, 1, 1, m.opts...)
				held := mustTake(t, s, 1)
				ctx, cancel := context.WithCancel(context.Background())
				head := goAcquire(ctx, s, 1)
				awaitWaiters(s, 1)
				follower := goAcquire(context.Background(), s, 1)
				awaitWaiters(s, 2)

				// Start both at once, each after a short random spin, so
				// that either may land first or inside the other.
				var gate, both sync.WaitGroup
				gate.Add(1)
				for _, act := range []func(){cancel, held.Release} {
					spin := rng.IntN(64)
					both.Add(1)
					go func() {
						defer both.Done()
						gate.Wait()
						for range spin {
							runtime.Gosched()
						}
						act()
					}()
				}
				gate.Done()
				both.Wait()

				head.waitFor(t)
				if head.err == nil {
					granted++
					head.tok.Release()
				} else {
					cancelled++
					require.Equal(t, context.Canceled, head.err)
				}
				follower.waitFor(t)
				require.NoError(t, follower.err)
				follower.tok.Release()
				require.Equal(t, atomicsem.Stats{Available: 1, Limit: 1, Max: 1}, s.Stats())
			}
			t.Logf("head granted %d times, cancelled %d times", granted, cancelled)
		})
	}
}
