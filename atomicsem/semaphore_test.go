package atomicsem_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/atomic"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// eachMode runs f once per fairness mode, for behaviour that the mode must
// not change.
func eachMode(t *testing.T, f func(t *testing.T, opts []atomicsem.Option)) {
	t.Helper()
	modes := []struct {
		name string
		opts []atomicsem.Option
	}{
		{"mode=fifo", nil},
		{"mode=barging", []atomicsem.Option{atomicsem.WithBarging()}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { f(t, m.opts) })
	}
}

// mustNew is New for arguments the test knows to be valid.
func mustNew(t testing.TB, initial, max int64, opts ...atomicsem.Option) *atomicsem.Semaphore {
	t.Helper()
	s, err := atomicsem.New(initial, max, opts...)
	require.NoError(t, err)
	return s
}

// mustTake takes n permits that the test knows to be free.
func mustTake(t testing.TB, s *atomicsem.Semaphore, n int64) *token.Token {
	t.Helper()
	tok, ok := s.TryAcquire(n)
	require.True(t, ok, "TryAcquire(%d) with %+v", n, s.Stats())
	return &tok
}

// pendingAcquire is an Acquire running in its own goroutine.
type pendingAcquire struct {
	done chan struct{} // closed when Acquire has returned
	tok  token.Token   // valid once done is closed
	err  error         // valid once done is closed
}

// goAcquire starts Acquire(ctx, n) in a new goroutine.
func goAcquire(ctx context.Context, s *atomicsem.Semaphore, n int64) *pendingAcquire {
	p := &pendingAcquire{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.tok, p.err = s.Acquire(ctx, n)
	}()
	return p
}

// returned reports whether the Acquire has returned, without blocking.
func (p *pendingAcquire) returned() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitFor waits for the Acquire to return, failing the test after a
// generous real-time limit instead of hanging the run.
func (p *pendingAcquire) waitFor(t testing.TB) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire did not return")
	}
}

// awaitWaiters spins until n acquirers are parked on s, for tests that
// cannot use a synctest bubble because they race real goroutines.
func awaitWaiters(t testing.TB, s *atomicsem.Semaphore, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Waiters < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters parked, want %d", s.Stats().Waiters, n)
		}
		runtime.Gosched()
	}
}

// counts is the part of Stats that a test states as an expectation.
type counts struct{ Available, Held, Limit int64 }

// countsOf returns the counts part of s.Stats().
func countsOf(s *atomicsem.Semaphore) counts {
	st := s.Stats()
	return counts{st.Available, st.Held, st.Limit}
}

// requireTokenPanic runs f and requires it to panic with a message in the
// token package's voice.
func requireTokenPanic(t *testing.T, f func()) {
	t.Helper()
	var msg string
	func() {
		defer func() {
			if r := recover(); r != nil {
				msg = fmt.Sprint(r)
			}
		}()
		f()
	}()
	require.True(t, strings.HasPrefix(msg, "token: "), "want a panic prefixed %q, got %q", "token: ", msg)
}

func TestNewRejectsBadArguments(t *testing.T) {
	tests := []struct {
		name         string
		initial, max int64
	}{
		{"negative initial", -1, 5},
		{"negative max", 0, -1},
		{"initial above max", 6, 5},
		{"max above MaxPermits", 0, atomicsem.MaxPermits + 1},
		{"both above MaxPermits", atomicsem.MaxPermits + 1, atomicsem.MaxPermits + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := atomicsem.New(tt.initial, tt.max)
			require.ErrorIs(t, err, atomicsem.ErrInvalidPermits)
			require.Nil(t, s)
		})
	}
}

func TestNewAcceptsTheEdges(t *testing.T) {
	tests := []struct {
		name         string
		initial, max int64
	}{
		{"empty", 0, 0},
		{"below its ceiling", 0, 10},
		{"widest", atomicsem.MaxPermits, atomicsem.MaxPermits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustNew(t, tt.initial, tt.max)
			require.Equal(t, atomicsem.Stats{Available: tt.initial, Limit: tt.initial, Max: tt.max}, s.Stats())
		})
	}
}

// TestRejectedCallsLeaveStatsUnchanged makes every kind of bad argument
// against a semaphore with permits held and a waiter parked, and checks that
// nothing moved. The parked waiter asks for more than the limit, so it stays
// parked in both modes whatever the rejected call does.
func TestRejectedCallsLeaveStatsUnchanged(t *testing.T) {
	const max = 10
	tests := []struct {
		name string
		call func(t *testing.T, s *atomicsem.Semaphore)
	}{
		{"Acquire negative", func(t *testing.T, s *atomicsem.Semaphore) {
			tok, err := s.Acquire(context.Background(), -1)
			require.ErrorIs(t, err, atomicsem.ErrInvalidPermits)
			require.Zero(t, tok.Permits())
		}},
		{"Acquire above MaxPermits", func(t *testing.T, s *atomicsem.Semaphore) {
			_, err := s.Acquire(context.Background(), atomicsem.MaxPermits+1)
			require.ErrorIs(t, err, atomicsem.ErrInvalidPermits)
		}},
		{"Acquire MaxInt64 with permits held", func(t *testing.T, s *atomicsem.Semaphore) {
			// held + n must not wrap around on the fast path.
			_, err := s.Acquire(context.Background(), math.MaxInt64)
			require.ErrorIs(t, err, atomicsem.ErrInvalidPermits)
		}},
		{"Acquire above max", func(t *testing.T, s *atomicsem.Semaphore) {
			// No limit could ever admit it, so it must fail at once rather
			// than wait: with fake time, a wait would show as a timeout.
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			start := time.Now()
			_, err := s.Acquire(ctx, max+1)
			require.ErrorIs(t, err, atomicsem.ErrExceedsMax)
			require.Zero(t, time.Since(start))
		}},
		{"Acquire MaxPermits above max", func(t *testing.T, s *atomicsem.Semaphore) {
			_, err := s.Acquire(context.Background(), atomicsem.MaxPermits)
			require.ErrorIs(t, err, atomicsem.ErrExceedsMax)
		}},
		{"TryAcquire negative", func(t *testing.T, s *atomicsem.Semaphore) {
			_, ok := s.TryAcquire(-1)
			require.False(t, ok)
		}},
		{"TryAcquire above MaxPermits", func(t *testing.T, s *atomicsem.Semaphore) {
			_, ok := s.TryAcquire(atomicsem.MaxPermits + 1)
			require.False(t, ok)
		}},
		{"TryAcquire MaxInt64 with permits held", func(t *testing.T, s *atomicsem.Semaphore) {
			_, ok := s.TryAcquire(math.MaxInt64)
			require.False(t, ok)
		}},
		{"TryAcquire above max", func(t *testing.T, s *atomicsem.Semaphore) {
			_, ok := s.TryAcquire(max + 1)
			require.False(t, ok)
		}},
		{"TryAcquire above available", func(t *testing.T, s *atomicsem.Semaphore) {
			_, ok := s.TryAcquire(s.Stats().Available + 1)
			require.False(t, ok)
		}},
		{"TryRelease zero", func(t *testing.T, s *atomicsem.Semaphore) {
			require.False(t, s.TryRelease(0))
		}},
		{"TryRelease negative", func(t *testing.T, s *atomicsem.Semaphore) {
			require.False(t, s.TryRelease(-1))
		}},
		{"TryRelease past max", func(t *testing.T, s *atomicsem.Semaphore) {
			require.False(t, s.TryRelease(max-s.Stats().Limit+1))
		}},
		{"TryRelease above MaxPermits", func(t *testing.T, s *atomicsem.Semaphore) {
			require.False(t, s.TryRelease(atomicsem.MaxPermits+1))
		}},
		{"SetLimit negative", func(t *testing.T, s *atomicsem.Semaphore) {
			require.ErrorIs(t, s.SetLimit(-1), atomicsem.ErrInvalidPermits)
		}},
		{"SetLimit above max", func(t *testing.T, s *atomicsem.Semaphore) {
			require.ErrorIs(t, s.SetLimit(max+1), atomicsem.ErrExceedsMax)
		}},
		{"Release of the zero Token", func(t *testing.T, s *atomicsem.Semaphore) {
			var tok token.Token
			requireTokenPanic(t, tok.Release)
		}},
		{"Forget of the zero Token", func(t *testing.T, s *atomicsem.Semaphore) {
			var tok token.Token
			requireTokenPanic(t, tok.Forget)
		}},
	}
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := mustNew(t, 3, max, opts...)
					require.True(t, s.TryRelease(2))
					held := mustTake(t, s, 2)
					ctx, cancel := context.WithCancel(context.Background())
					parked := goAcquire(ctx, s, 8)
					synctest.Wait()
					before := s.Stats()
					require.Equal(t, atomicsem.Stats{Available: 3, Held: 2, Limit: 5, Max: max, Waiters: 1}, before)

					tt.call(t, s)
					synctest.Wait()
					require.Equal(t, before, s.Stats())

					cancel()
					<-parked.done
					require.ErrorIs(t, parked.err, context.Canceled)
					held.Release()
				})
			})
		}
	})
}

func TestTokenMisusePanicsAndLeavesStatsUnchanged(t *testing.T) {
	tests := []struct {
		name          string
		first, second func(*token.Token)
	}{
		{"ReleaseTwice", (*token.Token).Release, (*token.Token).Release},
		{"ReleaseThenForget", (*token.Token).Release, (*token.Token).Forget},
		{"ForgetThenRelease", (*token.Token).Forget, (*token.Token).Release},
		{"ForgetTwice", (*token.Token).Forget, (*token.Token).Forget},
	}
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := mustNew(t, 5, 5, opts...)
				other := mustTake(t, s, 1)
				tok := mustTake(t, s, 2)
				tt.first(tok)
				before := s.Stats()
				requireTokenPanic(t, func() { tt.second(tok) })
				require.Equal(t, before, s.Stats())
				require.Zero(t, tok.Permits())
				other.Release()
			})
		}
	})
}

// TestHeldNeverExceedsLimitUnderLoad hammers one semaphore with mixed
// weights, some of them zero, through Acquire, TryAcquire and acquires that
// time out, and tracks what is held in a counter of its own: the semaphore
// must never grant past its limit, and must end exactly where it started.
func TestHeldNeverExceedsLimitUnderLoad(t *testing.T) {
	const (
		limit      = 10
		goroutines = 16
		rounds     = 1000
	)
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := mustNew(t, limit, limit, opts...)
		start := s.Stats()
		// A semaphore that stops granting shows as acquires that fail
		// rather than as a hung run.
		stuck, cancelStuck := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancelStuck()
		var inUse, peak, granted atomic.Int64
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 1))
				for range rounds {
					n := rng.Int64N(limit + 1)
					var tok token.Token
					switch rng.IntN(8) {
					case 0:
						var ok bool
						if tok, ok = s.TryAcquire(n); !ok {
							continue
						}
					case 1:
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(50))*time.Microsecond)
						var err error
						tok, err = s.Acquire(ctx, n)
						cancel()
						if errors.Is(err, context.DeadlineExceeded) {
							continue
						}
						if err != nil {
							t.Errorf("Acquire(%d): %v", n, err)
							return
						}
					default:
						var err error
						if tok, err = s.Acquire(stuck, n); err != nil {
							t.Errorf("Acquire(%d): %v", n, err)
							return
						}
					}
					granted.Inc()
					cur := inUse.Add(n)
					if p := peak.Load(); cur > p {
						peak.CompareAndSwap(p, cur)
					}
					if cur > limit {
						t.Errorf("%d permits held, limit %d", cur, limit)
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
		require.Equal(t, start, s.Stats())
		t.Logf("%d grants, peak %d of %d permits held", granted.Load(), peak.Load(), limit)
	})
}

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
		want         counts
	}{
		{"fills then refuses", 2, 2,
			[]step{try(1, true), try(1, true), try(1, false), rel(0), try(1, true)},
			counts{Available: 0, Held: 2, Limit: 2}},
		{"weighted", 5, 5,
			[]step{try(3, true), try(3, false), try(2, true), try(1, false), rel(0), try(3, true)},
			counts{Available: 0, Held: 5, Limit: 5}},
		{"release gives back the token's own weight", 4, 4,
			[]step{try(1, true), try(3, true), rel(1), try(3, true), try(1, false), rel(0), try(1, true)},
			counts{Available: 0, Held: 4, Limit: 4}},
		{"zero fits in an empty semaphore", 0, 3,
			[]step{try(0, true), try(1, false), try(0, true)},
			counts{Available: 0, Held: 0, Limit: 0}},
		{"limit below max bounds the take", 2, 4,
			[]step{try(3, false), try(2, true), try(1, false), rel(0), try(2, true)},
			counts{Available: 0, Held: 2, Limit: 2}},
		{"all at once", 3, 3,
			[]step{try(3, true), try(1, false), rel(0), try(4, false), try(3, true)},
			counts{Available: 0, Held: 3, Limit: 3}},
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
				require.Equal(t, tt.want, countsOf(s))
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
				awaitWaiters(t, s, 1)
				follower := goAcquire(context.Background(), s, 1)
				awaitWaiters(t, s, 2)

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
			p := goAcquire(ctx, s, 1)
			synctest.Wait()
			require.Equal(t, 1, s.Stats().Waiters)
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

func TestTryReleaseCountsHeldPermitsAgainstMax(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := mustNew(t, 5, 5, opts...)
		held := mustTake(t, s, 3)
		before := s.Stats()
		require.False(t, s.TryRelease(1), "limit is at max with 3 permits out: no room for more")
		require.Equal(t, before, s.Stats())
		held.Release()
		require.False(t, s.TryRelease(1), "releasing a token must not make room above max")

		require.NoError(t, s.SetLimit(2))
		held = mustTake(t, s, 2)
		require.True(t, s.TryRelease(3))
		require.Equal(t, counts{Available: 3, Held: 2, Limit: 5}, countsOf(s))
		require.False(t, s.TryRelease(1))
		held.Release()
		require.Equal(t, counts{Available: 5, Held: 0, Limit: 5}, countsOf(s))
	})
}

func TestForgetLowersLimit(t *testing.T) {
	tests := []struct {
		name   string
		holds  []int64  // tokens taken from New(5, 5)
		limit  int64    // then the limit is set to this
		forget []int    // then these tokens are forgotten, in order
		after  []counts // Stats after each Forget
	}{
		{"one of two", []int64{2, 1}, 5, []int{0},
			[]counts{{Available: 2, Held: 1, Limit: 3}}},
		{"all", []int64{2, 3}, 5, []int{1, 0},
			[]counts{{Available: 0, Held: 2, Limit: 2}, {Available: 0, Held: 0, Limit: 0}}},
		{"in debt after SetLimit(0)", []int64{4}, 0, []int{0},
			[]counts{{Available: 0, Held: 0, Limit: 0}}},
		{"in debt, limit stops at zero", []int64{2, 2}, 3, []int{0, 1},
			[]counts{{Available: -1, Held: 2, Limit: 1}, {Available: 0, Held: 0, Limit: 0}}},
	}
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := mustNew(t, 5, 5, opts...)
				var toks []*token.Token
				for _, n := range tt.holds {
					toks = append(toks, mustTake(t, s, n))
				}
				require.NoError(t, s.SetLimit(tt.limit))
				for i, idx := range tt.forget {
					toks[idx].Forget()
					require.Equal(t, tt.after[i], countsOf(s), "after forgetting token %d", idx)
				}
				for _, tok := range toks {
					if tok.Permits() > 0 {
						tok.Release()
					}
				}
				c := countsOf(s)
				require.Zero(t, c.Held)
				require.Equal(t, c.Limit, c.Available)
				// The forgotten permits can be put back, up to max.
				if c.Limit < 5 {
					require.True(t, s.TryRelease(5-c.Limit))
				}
				require.Equal(t, counts{Available: 5, Held: 0, Limit: 5}, countsOf(s))
			})
		}
	})
}

func TestSetLimitBelowHeldThenRaise(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := mustNew(t, 4, 8, opts...)
			a, b := mustTake(t, s, 2), mustTake(t, s, 1)

			// Throttle below what is held: no token is revoked, the
			// difference shows as debt.
			require.NoError(t, s.SetLimit(1))
			require.Equal(t, counts{Available: -2, Held: 3, Limit: 1}, countsOf(s))
			_, ok := s.TryAcquire(1)
			require.False(t, ok, "no permit may be taken while in debt")
			waiter := goAcquire(context.Background(), s, 1)
			synctest.Wait()
			require.False(t, waiter.returned(), "Acquire must wait while in debt")

			a.Release()
			synctest.Wait()
			require.Equal(t, counts{Available: 0, Held: 1, Limit: 1}, countsOf(s))
			require.False(t, waiter.returned(), "paying the debt off leaves nothing to grant")

			// Unthrottle: the waiter is served by SetLimit itself.
			require.NoError(t, s.SetLimit(6))
			synctest.Wait()
			require.True(t, waiter.returned(), "raising the limit must wake the waiter")
			require.NoError(t, waiter.err)
			require.Equal(t, atomicsem.Stats{Available: 4, Held: 2, Limit: 6, Max: 8}, s.Stats())

			waiter.tok.Release()
			b.Release()
			require.Equal(t, counts{Available: 6, Held: 0, Limit: 6}, countsOf(s))
		})
	})
}

func TestCloseFailsParkedWaitersAndLaterCalls(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := mustNew(t, 2, 6, opts...)
			a := mustTake(t, s, 1)
			b := mustTake(t, s, 1)
			var parked []*pendingAcquire
			for n := int64(1); n <= 3; n++ {
				parked = append(parked, goAcquire(context.Background(), s, n))
			}
			synctest.Wait()
			require.Equal(t, 3, s.Stats().Waiters)

			s.Close()
			synctest.Wait()
			for _, p := range parked {
				require.True(t, p.returned(), "Close must wake every parked waiter")
				require.ErrorIs(t, p.err, atomicsem.ErrClosed)
				require.Zero(t, p.tok.Permits())
			}
			want := atomicsem.Stats{Available: 0, Held: 2, Limit: 2, Max: 6, Waiters: 0, Closed: true}
			require.Equal(t, want, s.Stats())

			// Every call that would change the count fails, and changes nothing.
			_, err := s.Acquire(context.Background(), 1)
			require.ErrorIs(t, err, atomicsem.ErrClosed)
			_, err = s.Acquire(context.Background(), 0)
			require.ErrorIs(t, err, atomicsem.ErrClosed)
			_, ok := s.TryAcquire(0)
			require.False(t, ok)
			require.False(t, s.TryRelease(1))
			require.ErrorIs(t, s.SetLimit(4), atomicsem.ErrClosed)
			s.Close()
			require.Equal(t, want, s.Stats())

			// Tokens already out can still be ended, and are accounted for.
			a.Release()
			b.Forget()
			want.Available, want.Held, want.Limit = 1, 0, 1
			require.Equal(t, want, s.Stats())
			_, ok = s.TryAcquire(1)
			require.False(t, ok, "free permits must stay out of reach once closed")
		})
	})
}

// TestReleaseSynchronizesBeforeAcquire passes a plain variable between
// goroutines with nothing but the semaphore to order the accesses. Under
// -race, any path by which permits reach an acquirer without a
// happens-before edge from the release shows up as a data race.
func TestReleaseSynchronizesBeforeAcquire(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		stuck, cancelStuck := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancelStuck()
		t.Run("token release", func(t *testing.T) {
			const goroutines, rounds = 4, 2000
			s := mustNew(t, 1, 1, opts...)
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
								t.Error(err)
								return
							}
						}
						shared++
						tok.Release()
					}
				}()
			}
			wg.Wait()
			require.Equal(t, goroutines*rounds, shared)
		})

		// Permits added by TryRelease and retired by Forget carry the
		// ordering too: a message goes out through one semaphore and the
		// acknowledgement comes back through another.
		t.Run("TryRelease and Forget", func(t *testing.T) {
			const rounds = 2000
			out := mustNew(t, 0, 1, opts...)
			back := mustNew(t, 0, 1, opts...)
			msg := 0 // guarded by out and back alone
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := range rounds {
					tok, err := out.Acquire(stuck, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if msg != i {
						t.Errorf("read %d, want %d", msg, i)
					}
					msg = -1
					tok.Forget()
					if !back.TryRelease(1) {
						t.Error("acknowledgement refused")
						return
					}
				}
			}()
			for i := range rounds {
				msg = i
				require.True(t, out.TryRelease(1))
				tok, err := back.Acquire(stuck, 1)
				require.NoError(t, err)
				require.Equal(t, -1, msg)
				tok.Forget()
			}
			<-done
		})
	})
}

// TestStatsInvariantsHoldUnderChurn samples Stats while every operation
// that moves the counts runs at once: each snapshot must be a state the
// semaphore could be in, and once the churn stops nothing may be held.
func TestStatsInvariantsHoldUnderChurn(t *testing.T) {
	const max = 8
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := mustNew(t, 4, max, opts...)
		stop := make(chan struct{})
		var workers, sampler sync.WaitGroup
		var samples atomic.Int64

		sampler.Add(1)
		go func() {
			defer sampler.Done()
			for {
				st := s.Stats()
				samples.Inc()
				switch {
				case st.Available+st.Held != st.Limit:
					t.Errorf("Available+Held != Limit in %+v", st)
				case st.Limit < 0 || st.Limit > st.Max || st.Max != max:
					t.Errorf("limit out of [0, Max] in %+v", st)
				case st.Held < 0 || st.Held > st.Max:
					t.Errorf("held out of [0, Max] in %+v", st)
				case st.Waiters < 0 || st.Closed:
					t.Errorf("bad waiters or closed in %+v", st)
				}
				select {
				case <-stop:
					return
				default:
					runtime.Gosched()
				}
			}
		}()

		for g := range 6 {
			workers.Add(1)
			go func() {
				defer workers.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 2))
				for range 1000 {
					switch rng.IntN(10) {
					case 0:
						_ = s.SetLimit(rng.Int64N(max + 1))
					case 1:
						s.TryRelease(rng.Int64N(3) + 1)
					default:
						n := rng.Int64N(max + 1)
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(200))*time.Microsecond)
						tok, err := s.Acquire(ctx, n)
						cancel()
						if err != nil {
							if !errors.Is(err, context.DeadlineExceeded) {
								t.Errorf("Acquire(%d): %v", n, err)
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
		require.Zero(t, st.Held)
		require.Equal(t, st.Limit, st.Available)
		require.Zero(t, st.Waiters)
		require.Positive(t, samples.Load())
	})
}
