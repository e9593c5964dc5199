package rediscredit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credit"
)

// DefaultFallbackMaxKeys is the cap on the keys whose local buckets a
// Limiter made WithFallback keeps at once, unless WithFallbackMaxKeys sets
// another.
const DefaultFallbackMaxKeys = 1 << 16

// WithFallback makes the Limiter fail open: a call that finds Redis
// unavailable spends from a bucket of its key in this process instead, at
// share of the rate and of the burst (at least 1 credit, at most
// atomicsem.MaxPermits), and says so in Result.Local. share must be in
// (0, 1]; a fleet of N processes that must not exceed the rate together
// uses 1/N. Without WithFallback a Limiter fails closed: calls return
// ErrUnavailable.
//
// A key's local bucket is full when the key first falls back, and keeps
// its state for as long as it is not full again, whether Redis answers in
// between or not: credit spent locally in one outage is not there in the
// next until it has accrued again. So, however often Redis fails, in any
// window of length w a process's fallback grants a key at most its burst
// plus share·rate·w, on top of what Redis grants (see the package
// documentation for the bound). A bucket that is full again may be dropped,
// as it is then no different from a new one; the local buckets of at most
// DefaultFallbackMaxKeys keys are kept at once (see WithFallbackMaxKeys).
//
// A local decision is made before the call's deadline: a round trip of a
// Limiter that falls back gets four fifths of the time left until its
// context's deadline, and the rest is the fallback's (a process kept off
// the CPU for longer than that fifth decides late by the difference). A
// Spend whose deadline has passed when its round trip fails does not wait
// for local credit, and returns the round trip's ErrUnavailable.
func WithFallback(share float64) Option {
	return func(l *Limiter) error {
		if !(share > 0 && share <= 1) {
			return fmt.Errorf("rediscredit: fallback share %v is outside (0, 1]", share)
		}
		l.local = &fallback{share: share}
		return nil
	}
}

// WithFallbackMaxKeys sets the cap on the keys whose local buckets the
// fallback keeps at once (see WithFallback), DefaultFallbackMaxKeys
// otherwise; n must be at least 1. A key new to a fallback that holds its
// cap takes the place of one whose bucket is full again; if the few it
// looks at are all in use, the call is decided as without a fallback, with
// ErrUnavailable, and no key's state is lost: a key in the middle of its
// local limit is never dropped, so the cap never resets a limit. New
// returns an error for WithFallbackMaxKeys without WithFallback.
func WithFallbackMaxKeys(n int64) Option {
	return func(l *Limiter) error {
		if n < 1 {
			return fmt.Errorf("rediscredit: fallback cap of %d keys is under 1", n)
		}
		l.localKeys = n
		return nil
	}
}

// evictScan is how many entries a key new to a full table looks at for
// ones to drop: a few, so that the insert costs a bounded time, and
// enough that a table with any droppable share finds one.
const evictScan = 64

// fallback is the fail-open policy: a table of credit buckets in this
// process, one per key that fell back, at a share of the Limiter's rate
// and burst. A bucket stays while it is not full, so credit spent locally
// stays spent across outages, and may be dropped once it is full, when a
// new key needs its place: a new bucket is full, so dropping one changes
// no answer.
type fallback struct {
	share   float64
	maxKeys int64 // set by New

	mu   sync.Mutex
	keys map[string]*localBucket // guarded by mu
}

// localBucket is one key's bucket and what the table knows of it.
type localBucket struct {
	b *credit.Bucket
	// rate is the Limiter's rate that b accrues a share of; a key takes a
	// new rate at its next call, as the keys in Redis do. Guarded by the
	// table's mu.
	rate *rate
	// pins counts the calls that use b outside the table's mu (a Spend
	// waiting for credit); a pinned bucket is not dropped, so that no
	// second bucket is made for its key while one is in use. Guarded by
	// the table's mu.
	pins int
}

// init sets the cap on keys, WithFallbackMaxKeys's maxKeys if not 0, after
// the options. f may be nil (a Limiter that fails closed), and then
// maxKeys must be 0.
func (f *fallback) init(maxKeys int64) error {
	if f == nil {
		if maxKeys != 0 {
			return errors.New("rediscredit: WithFallbackMaxKeys without WithFallback")
		}
		return nil
	}
	f.maxKeys = cmp.Or(maxKeys, DefaultFallbackMaxKeys)
	return nil
}

// burst returns the local buckets' burst for a Limiter's burst.
func (f *fallback) burst(burst int64) int64 {
	return min(max(int64(math.Floor(float64(burst)*f.share)), 1), atomicsem.MaxPermits)
}

// lookup returns key's bucket, making a full one if key has none and the
// table has room or makes room; nil if it has not. It requires that f.mu
// is held.
func (f *fallback) lookup(l *Limiter, key string) *localBucket {
	r := l.rate.Load()
	e := f.keys[key]
	if e == nil {
		if int64(len(f.keys)) >= f.maxKeys && !f.evict() {
			return nil
		}
		e = &localBucket{b: credit.MustNew(r.f*f.share, f.burst(l.burst)), rate: r}
		if f.keys == nil {
			f.keys = make(map[string]*localBucket)
		}
		f.keys[key] = e
	}
	if e.rate != r {
		// The rate changed since the key last fell back: its accrual so
		// far is settled at the old share.
		_ = e.b.SetRate(r.f * f.share)
		e.rate = r
	}
	return e
}

// evict drops the buckets that are full again, with nothing reserved and
// no call using them, among the first evictScan in the map's (random)
// order, and reports whether it dropped any. It requires that f.mu is
// held.
func (f *fallback) evict() bool {
	seen, dropped := 0, false
	for key, e := range f.keys {
		if seen++; seen > evictScan {
			break
		}
		if e.pins > 0 {
			continue
		}
		if st := e.b.Stats(); st.Balance == st.Burst && st.Reserved == 0 && st.Waiters == 0 {
			delete(f.keys, key)
			dropped = true
		}
	}
	return dropped
}

func localResult(b *credit.Bucket, ok bool) Result {
	st := b.Stats()
	return Result{OK: ok, Balance: st.Balance, Reserved: st.Reserved, Time: time.Now(), Local: true}
}

// trySpend decides a TrySpend of n credits of key locally, after Redis
// failed with unavailable; it returns unavailable if the table has no
// room for key.
func (f *fallback) trySpend(l *Limiter, key string, n int64, unavailable error) (Result, error) {
	f.mu.Lock()
	e := f.lookup(l, key)
	if e == nil {
		f.mu.Unlock()
		return Result{}, unavailable
	}
	ok := e.b.TrySpend(n)
	f.mu.Unlock()
	return localResult(e.b, ok), nil
}

// spend decides a Spend of n credits of key locally, waiting for the local
// bucket's credit, after Redis failed with unavailable. It returns
// unavailable if ctx's deadline has passed already (the round trip took
// its time; wrapping context.DeadlineExceeded), if the table has no room
// for key, or if the local burst is under n, so that no wait could cover
// it; and ctx.Err() if ctx was cancelled.
func (f *fallback) spend(ctx context.Context, l *Limiter, key string, n int64, unavailable error) (Result, error) {
	if err := ctx.Err(); err != nil {
		switch {
		case !errors.Is(err, context.DeadlineExceeded):
			return Result{}, err
		case !errors.Is(unavailable, err):
			unavailable = fmt.Errorf("%w: %w", unavailable, err)
		}
		return Result{}, unavailable
	}
	if n > f.burst(l.burst) {
		return Result{}, unavailable
	}
	f.mu.Lock()
	e := f.lookup(l, key)
	if e == nil {
		f.mu.Unlock()
		return Result{}, unavailable
	}
	e.pins++
	f.mu.Unlock()
	err := e.b.Spend(ctx, n)
	f.mu.Lock()
	e.pins--
	f.mu.Unlock()
	if err != nil {
		return Result{}, err
	}
	return localResult(e.b, true), nil
}

// tryReserve decides a TryReserve of n credits of key locally, after Redis
// failed with unavailable; it returns unavailable if the table has no
// room for key.
func (f *fallback) tryReserve(l *Limiter, key string, n int64, unavailable error) (*Reservation, Result, error) {
	f.mu.Lock()
	e := f.lookup(l, key)
	if e == nil {
		f.mu.Unlock()
		return nil, Result{}, unavailable
	}
	tok, ok := e.b.TryAcquire(n)
	f.mu.Unlock()
	if !ok {
		return nil, localResult(e.b, false), nil
	}
	return &Reservation{l: l, key: key, n: n, local: &tok}, localResult(e.b, true), nil
}

// noCancel is the cancel func of a round trip that runs under its
// caller's context.
func noCancel() {}

// trip returns the context a round trip runs under, and its cancel func:
// ctx itself, or, for a Limiter that falls back and a ctx with a deadline,
// ctx with a deadline a fifth of the time left earlier, so that a round
// trip that finds Redis unreachable or silent leaves the fallback time to
// decide before the caller's deadline, on a loaded machine too (where the
// client may notice its deadline some milliseconds late).
func (l *Limiter) trip(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.local == nil {
		return ctx, noCancel
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, noCancel
	}
	return context.WithDeadline(ctx, dl.Add(-time.Until(dl)/5))
}
