package rediscredit

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/atomicsem/atomicsem/credit"
)

// fallback is the fail-open policy: a credit.Bucket per key in this
// process, at a share of the rate and the burst, used while Redis is
// unavailable. The buckets are made full at the first call that fails and
// dropped at the first call that Redis answers, so memory follows the keys
// used during an outage.
type fallback struct {
	share float64
	// active is set while any local bucket exists, so that a call Redis
	// answers costs one atomic load to learn there is nothing to drop.
	active  atomic.Bool
	mu      sync.Mutex
	buckets map[string]*credit.Bucket // guarded by mu
}

func newFallback(share float64) *fallback { return &fallback{share: share} }

// bucket returns key's local bucket, making it full if it is new.
func (f *fallback) bucket(l *Limiter, key string) *credit.Bucket {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.buckets[key]
	if b == nil {
		burst := max(int64(math.Floor(float64(l.burst)*f.share)), 1)
		b = credit.MustNew(l.Rate()*f.share, burst)
		if f.buckets == nil {
			f.buckets = make(map[string]*credit.Bucket)
		}
		f.buckets[key] = b
		f.active.Store(true)
	}
	return b
}

// recovered drops the local buckets after Redis answered. f may be nil (a
// Limiter that fails closed).
func (f *fallback) recovered() {
	if f == nil || !f.active.Load() {
		return
	}
	f.mu.Lock()
	f.buckets = nil
	f.active.Store(false)
	f.mu.Unlock()
}

func localResult(b *credit.Bucket, ok bool) Result {
	st := b.Stats()
	return Result{OK: ok, Balance: st.Balance, Reserved: st.Reserved, Time: time.Now(), Local: true}
}

func (f *fallback) trySpend(l *Limiter, key string, n int64) Result {
	b := f.bucket(l, key)
	return localResult(b, b.TrySpend(n))
}

func (f *fallback) spend(ctx context.Context, l *Limiter, key string, n int64) (Result, error) {
	b := f.bucket(l, key)
	if err := b.Spend(ctx, n); err != nil {
		return Result{}, err
	}
	return localResult(b, true), nil
}

func (f *fallback) tryReserve(l *Limiter, key string, n int64) (*Reservation, Result, error) {
	b := f.bucket(l, key)
	r := &Reservation{l: l, key: key, n: n}
	tok, ok := b.TryAcquire(n)
	if !ok {
		return nil, localResult(b, false), nil
	}
	r.local = &tok
	return r, localResult(b, true), nil
}
