package atomicsem_test

// The permit cache (WithPermitCache): acquires and releases stay off the
// word while its stripes are on, and everything a stripe may hold is
// returned to the word before an answer that depends on it (SetLimit,
// Close, WaitIdle, a failing TryAcquire, a waiter's park).

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// bigLimit is a limit large enough that the cache's default sizing turns
// it on at any GOMAXPROCS a test machine has.
const bigLimit = 100_000

// newCached is mustNew with a permit cache.
func newCached(t testing.TB, initial, max int64, opts ...atomicsem.Option) *atomicsem.Semaphore {
	t.Helper()
	return mustNew(t, initial, max, append(opts, atomicsem.WithPermitCache())...)
}

// requireCacheExact checks the cache's invariants and the word's.
func requireCacheExact(t *testing.T, s *atomicsem.Semaphore) {
	t.Helper()
	require.Empty(t, atomicsem.CacheError(s))
	requireQueueFlags(t, s)
}

// A goroutine that takes and returns permits again and again works on its
// stripe alone once the stripe holds a block: the word does not change.
func TestPermitCacheKeepsAcquiresOffTheWord(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := newCached(t, bigLimit, bigLimit, opts...)
		require.True(t, atomicsem.CacheOn(s))
		cycle := func(rounds int) {
			for range rounds {
				tok, err := s.Acquire(t.Context(), 1)
				if err != nil {
					panic(err)
				}
				tok.Release()
				if tok, ok := s.TryAcquire(1); ok {
					tok.Release()
				} else {
					panic("TryAcquire(1) failed with every permit free")
				}
			}
		}
		// The stripes draw their blocks. (A goroutine whose stack grows
		// moves to another stripe, which draws a block of its own: no
		// assertion runs between the warm-up and the count.)
		cycle(10)
		before := atomicsem.WordStats(s)
		cycle(1000)
		after := atomicsem.WordStats(s)
		require.Greater(t, before.Held, int64(0), "the stripes hold a block, which the word counts as held")
		require.Equal(t, before, after, "an acquire or a release went to the word")
		require.Equal(t, atomicsem.Stats{Available: bigLimit, Limit: bigLimit, Max: bigLimit}, s.Stats())
		require.Zero(t, s.Held())
		requireCacheExact(t, s)
	})
}

// Bug shape: SetLimit that lowers the limit while stripes hold permits. If
// they stay on, acquirers take the cached permits beyond the new limit;
// if the word keeps counting them as held, acquirers wait for permits
// nobody holds. SetLimit returns them to the word and turns the stripes
// off, and the counts are exact.
func TestPermitCacheSetLimitLeavesNoCachedPermitBeyondIt(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := newCached(t, bigLimit, bigLimit, opts...)
		var toks []*token.Token
		for range 10 {
			toks = append(toks, mustTake(t, s, 1))
		}
		require.Greater(t, atomicsem.WordStats(s).Held, int64(10), "the stripe should hold a block")

		require.NoError(t, s.SetLimit(5))
		require.False(t, atomicsem.CacheOn(s))
		want := atomicsem.Stats{Available: -5, Held: 10, Limit: 5, Max: bigLimit}
		require.Equal(t, want, s.Stats())
		require.Equal(t, want, atomicsem.WordStats(s), "the word still counts cached permits as held")
		_, ok := s.TryAcquire(1)
		require.False(t, ok, "an arrival took a permit beyond the lowered limit")
		requireCacheExact(t, s)

		for _, tok := range toks[:6] {
			tok.Release()
		}
		tok := mustTake(t, s, 1) // 4 held of 5
		_, ok = s.TryAcquire(1)
		require.False(t, ok)
		tok.Release()
		for _, tok := range toks[6:] {
			tok.Release()
		}

		// Raised again, the stripes go back on with the next release that
		// leaves enough free.
		require.NoError(t, s.SetLimit(bigLimit))
		tok = mustTake(t, s, 1)
		tok.Release()
		require.True(t, atomicsem.CacheOn(s), "the stripes stay off with the limit back up")
		require.Equal(t, atomicsem.Stats{Available: bigLimit, Limit: bigLimit, Max: bigLimit}, s.Stats())
		requireCacheExact(t, s)
	})
}

// Bug shape: a lowered limit that cached permits let concurrent acquirers
// exceed. Goroutines take and return permits while the limit drops from
// bigLimit to 50; every acquire that begins after SetLimit has returned
// must find at most 50 permits in tokens once it has its own (counted
// after the acquire and before the release, so the count never exceeds
// what tokens hold).
func TestPermitCacheLowerLimitHoldsUnderLoad(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		const low = 50
		s := newCached(t, bigLimit, bigLimit, opts...)
		var inTokens atomic.Int64
		var lowered atomic.Bool
		ctx, stop := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer stop()
		var wg sync.WaitGroup
		var over atomic.Int64
		for g := range 8 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 7))
				for ctx.Err() == nil {
					after := lowered.Load()
					n := 1 + rng.Int64N(5)
					tok, err := s.Acquire(context.Background(), n)
					if err != nil {
						panic(err)
					}
					if held := inTokens.Add(n); after && held > low {
						over.Store(held)
					}
					if rng.IntN(2) == 0 {
						time.Sleep(time.Microsecond)
					}
					inTokens.Add(-n)
					tok.Release()
				}
			})
		}
		time.Sleep(50 * time.Millisecond) // the stripes fill
		require.NoError(t, s.SetLimit(low))
		lowered.Store(true)
		requireFinishes(t, &wg, s)
		require.Zero(t, over.Load(), "permits held by tokens above the lowered limit of %d", low)
		require.Equal(t, atomicsem.Stats{Available: low, Limit: low, Max: bigLimit}, s.Stats())
		requireCacheExact(t, s)
	})
}

// Bug shape: WaitIdle on a semaphore whose stripes hold permits. The word
// counts them as held, so a WaitIdle that looks at the word alone never
// returns. It must return once the last token is released.
func TestPermitCacheWaitIdleEndsWithTheLastToken(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := newCached(t, bigLimit, bigLimit, opts...)
			a, b := mustTake(t, s, 1), mustTake(t, s, 2)
			done := goWaitIdle(t.Context(), s)
			requireWaitIdleBlocked(t, done)
			require.False(t, atomicsem.CacheOn(s), "the stripes stay on while WaitIdle waits")
			requireCacheExact(t, s)
			a.Release()
			requireWaitIdleBlocked(t, done)
			b.Release()
			requireWaitIdleReturnedNil(t, done)
			require.Equal(t, atomicsem.Stats{Available: bigLimit, Limit: bigLimit, Max: bigLimit}, s.Stats())

			// Idle with the stripes full: WaitIdle returns nil at once, even
			// with its context done.
			for range 2 { // the first release turns the stripes on, the next draws a block
				tok := mustTake(t, s, 1)
				tok.Release()
			}
			require.True(t, atomicsem.CacheOn(s))
			require.Greater(t, atomicsem.WordStats(s).Held, int64(0))
			cancelled, cancel := context.WithCancel(t.Context())
			cancel()
			require.NoError(t, s.WaitIdle(cancelled))
		})
	})
}

// Close returns the cached permits to the word: Stats say exactly what
// tokens hold, acquires fail, and the tokens out may still be released.
func TestPermitCacheCloseIsExact(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := newCached(t, bigLimit, bigLimit, opts...)
		tok := mustTake(t, s, 3)
		s.Close()
		require.False(t, atomicsem.CacheOn(s))
		require.Equal(t, atomicsem.Stats{Available: bigLimit - 3, Held: 3, Limit: bigLimit, Max: bigLimit, Closed: true}, s.Stats())
		_, ok := s.TryAcquire(1)
		require.False(t, ok)
		_, err := s.Acquire(t.Context(), 1)
		require.ErrorIs(t, err, atomicsem.ErrClosed)
		requireCacheExact(t, s)
		tok.Release()
		require.NoError(t, s.WaitIdle(t.Context()))
		require.Equal(t, atomicsem.Stats{Available: bigLimit, Limit: bigLimit, Max: bigLimit, Closed: true}, s.Stats())
		require.False(t, atomicsem.CacheOn(s), "a release turned the stripes of a closed semaphore on")
	})
}

// Bug shape: a TryAcquire that asks the word alone fails while the
// stripes hold the permits it asks for. It must find them.
func TestPermitCacheTryAcquireFindsCachedPermits(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := newCached(t, bigLimit, bigLimit, opts...)
		one := mustTake(t, s, 1) // the stripe draws a block
		require.Greater(t, atomicsem.WordStats(s).Held, int64(1))
		rest, ok := s.TryAcquire(bigLimit - 1)
		require.True(t, ok, "TryAcquire missed permits held by a stripe: %+v", s.Stats())
		_, ok = s.TryAcquire(1)
		require.False(t, ok)
		require.Equal(t, atomicsem.Stats{Available: 0, Held: bigLimit, Limit: bigLimit, Max: bigLimit}, s.Stats())
		requireCacheExact(t, s)
		rest.Release()
		one.Release()
		require.Equal(t, atomicsem.Stats{Available: bigLimit, Limit: bigLimit, Max: bigLimit}, s.Stats())

		// TryForget, likewise.
		one = mustTake(t, s, 1)
		limit, ok := s.TryForget(bigLimit - 1)
		require.True(t, ok, "TryForget missed permits held by a stripe: %+v", s.Stats())
		require.Equal(t, int64(1), limit)
		one.Release()
		require.Equal(t, atomicsem.Stats{Available: 1, Limit: 1, Max: bigLimit}, s.Stats())
		requireCacheExact(t, s)
	})
}

// Near the limit a stripe draws only what it is asked for: a block drawn
// there would keep permits from the other cores, which would then find
// the word dry and turn every stripe off. With the word left at its
// reserve, an acquire on a stripe that lacks the permit draws exactly one.
func TestPermitCacheDrawsNoBlockNearTheLimit(t *testing.T) {
	s := newCached(t, bigLimit, bigLimit)
	block, reserve := atomicsem.CacheSizes(s)
	require.Greater(t, reserve, block)
	bulk, err := s.Acquire(t.Context(), bigLimit-reserve) // no block drawn: the word would fall below its reserve
	require.NoError(t, err)
	require.Equal(t, bigLimit-reserve, atomicsem.WordStats(s).Held)
	require.True(t, atomicsem.CacheOn(s))

	var one token.Token
	done := make(chan struct{})
	go func() { // another goroutine, whose stripe is empty
		defer close(done)
		one, _ = s.TryAcquire(1)
	}()
	<-done
	require.Equal(t, int64(1), one.Permits())
	require.Equal(t, bigLimit-reserve+1, atomicsem.WordStats(s).Held, "a stripe drew a block below the reserve")
	one.Release()
	bulk.Release()
	require.Equal(t, atomicsem.Stats{Available: bigLimit, Limit: bigLimit, Max: bigLimit}, s.Stats())
}

// Bug shape: an Acquire that parks while the stripes hold the permits it
// waits for: nothing releases them. It must take them; and waiters that
// do park are served in their order, by releases of tokens from the
// stripes.
func TestPermitCacheWaitersNeverParkBesideCachedPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newCached(t, bigLimit, bigLimit)
		one := mustTake(t, s, 1)
		rest, err := s.Acquire(t.Context(), bigLimit-1)
		require.NoError(t, err)
		require.False(t, atomicsem.CacheOn(s))

		first := park(t, s, t.Context(), 2)
		second := park(t, s, t.Context(), 1)
		requireCacheExact(t, s)
		one.Release()
		synctest.Wait()
		requireReturned(t, []*pendingAcquire{first, second})
		rest.Release()
		synctest.Wait()
		requireGranted(t, first, 2)
		requireGranted(t, second, 1)
		first.tok.Release()
		second.tok.Release()
		require.Equal(t, atomicsem.Stats{Available: bigLimit, Limit: bigLimit, Max: bigLimit}, s.Stats())
		requireCacheExact(t, s)
	})
}

// The cache's invariants and the word's hold under a random concurrent mix
// of every operation, with blocks of one permit so that the stripes turn
// on and off all the time; a checker takes the queue lock now and then.
func TestPermitCacheStaysExactUnderConcurrentChurn(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		const maxPermits = 32
		s := newCached(t, maxPermits, maxPermits, opts...)
		atomicsem.TinyCache(s)
		ctx, stop := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer stop()
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Go(func() { churn(ctx, s, uint64(g)) })
		}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(98, 0))
			for ctx.Err() == nil {
				switch rng.IntN(4) {
				case 0:
					_ = s.SetLimit(rng.Int64N(maxPermits + 1))
				case 1:
					s.TryRelease(1)
				case 2:
					wait, cancel := context.WithTimeout(ctx, 50*time.Microsecond)
					_ = s.WaitIdle(wait)
					cancel()
				case 3:
					_ = s.SetLimit(maxPermits)
				}
				time.Sleep(20 * time.Microsecond)
			}
		})
		checks, problems, on := 0, map[string]int{}, 0
		wg.Go(func() { // the checker, which takes the queue lock
			for ctx.Err() == nil {
				for _, msg := range []string{atomicsem.QueueFlagsError(s), atomicsem.CacheError(s)} {
					if msg != "" {
						problems[msg]++
					}
				}
				if atomicsem.CacheOn(s) {
					on++
				}
				checks++
				time.Sleep(10 * time.Microsecond)
			}
		})
		requireFinishes(t, &wg, s)
		require.Empty(t, problems, "after %d checks", checks)
		requireCacheExact(t, s)
		st := s.Stats()
		require.Zero(t, st.Held)
		require.Zero(t, st.Waiters)
		t.Logf("%d checks, the stripes on at %d", checks, on)
	})
}

// A stripe has a cache line to itself: its size is the line's, and the
// array starts on a line boundary.
func TestPermitCacheStripesFillCacheLines(t *testing.T) {
	size, align := atomicsem.StripeLayout(newCached(t, bigLimit, bigLimit))
	require.Equal(t, uintptr(64), size)
	require.Zero(t, align%64, "the stripes start %d bytes into a cache line", align%64)
}

// requireFinishes waits for wg, and fails the test, rather than hang it,
// if the goroutines are not done within a generous real-time limit: one
// stuck on a broken semaphore, or on its lock, would otherwise hold the
// run until go test's timeout.
func requireFinishes(t *testing.T, wg *sync.WaitGroup, s *atomicsem.Semaphore) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the goroutines did not finish within 10s; the word: %+v", atomicsem.WordStats(s))
	}
}
