package atomicsem_test

// New and MustNew, Close, and what holds across every call: bad arguments
// change nothing, the limit is never passed, Stats stays consistent, and a
// release synchronizes before the acquire it serves.

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/atomic"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

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

// MustNew is New for package-level semaphores: it panics, prefixed, on
// arguments New refuses.
func TestMustNewPanicsOnWhatNewRefuses(t *testing.T) {
	s := atomicsem.MustNew(2, 4)
	require.Equal(t, atomicsem.Stats{Available: 2, Limit: 2, Max: 4}, s.Stats())
	for _, args := range [][2]int64{{-1, 1}, {5, 4}, {0, atomicsem.MaxPermits + 1}} {
		require.PanicsWithError(t,
			"atomicsem: invalid number of permits: New("+itoa(args[0])+", "+itoa(args[1])+") needs 0 ≤ initial ≤ max ≤ 1073741823",
			func() { atomicsem.MustNew(args[0], args[1]) })
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// A Semaphore not made by New is not a semaphore of maximum zero: every
// method panics with a message that says what went wrong, on the fast
// paths too, and nothing hangs.
func TestZeroSemaphorePanicsOnFirstUse(t *testing.T) {
	const msg = "atomicsem: Semaphore used without New (the zero value is not usable)"
	calls := map[string]func(s *atomicsem.Semaphore){
		"Acquire":    func(s *atomicsem.Semaphore) { _, _ = s.Acquire(context.Background(), 1) },
		"Acquire0":   func(s *atomicsem.Semaphore) { _, _ = s.Acquire(context.Background(), 0) },
		"TryAcquire": func(s *atomicsem.Semaphore) { _, _ = s.TryAcquire(1) },
		"TryRelease": func(s *atomicsem.Semaphore) { s.TryRelease(1) },
		"Refill":     func(s *atomicsem.Semaphore) { s.Refill(1) },
		"SetLimit":   func(s *atomicsem.Semaphore) { _ = s.SetLimit(0) },
		"Close":      func(s *atomicsem.Semaphore) { s.Close() },
		"Stats":      func(s *atomicsem.Semaphore) { s.Stats() },
		"WaitIdle":   func(s *atomicsem.Semaphore) { _ = s.WaitIdle(context.Background()) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			var s atomicsem.Semaphore
			require.PanicsWithValue(t, msg, func() { call(&s) })
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
					parked := park(t, s, ctx, 8)
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

// Bug shape: Close that leaves a waiter parked, grants it, or loses track of
// the permits that tokens still hold. The waiters here ask for what fits,
// for what fits only once a permit comes back (with a ctx that could also
// end the wait), and for more than the limit.
func TestCloseFailsParkedWaitersAndLaterCalls(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := mustNew(t, 2, 6, opts...)
			a := mustTake(t, s, 1)
			b := mustTake(t, s, 1)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			parked := []*pendingAcquire{
				park(t, s, t.Context(), 1),
				park(t, s, ctx, 2),
				park(t, s, t.Context(), 3), // above the limit, within the maximum
			}

			s.Close()
			synctest.Wait()
			requireReturned(t, parked, 0, 1, 2)
			for _, p := range parked {
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
