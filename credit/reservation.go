package credit

import (
	"sync"

	"github.com/atomicsem/atomicsem/token"
)

// reservation is the owner of the tokens that Acquire and TryAcquire
// return: it holds the semaphore's token for the credit, so that the
// bucket sees the credit settled. Forgetting reserved credit is a spend,
// which restarts accrual if it leaves a full bucket; a semaphore token
// handed to the caller would forget it without the bucket knowing.
//
// The parts of a split token share the reservation, and may be ended by
// different goroutines at once; mu orders them.
type reservation struct {
	b   *Bucket
	mu  sync.Mutex
	tok token.Token // the credit not yet settled; guarded by mu
}

// tryReserve takes n credits from the balance as a reservation, or returns
// nil. A limit below n rules the balance out before a record is allocated.
func (b *Bucket) tryReserve(n int64) *reservation {
	if limit, _ := b.sem.TryForget(0); limit < n {
		return nil
	}
	r := &reservation{b: b}
	var ok bool
	if r.tok, ok = b.sem.TryAcquire(n); !ok {
		return nil
	}
	return r
}

// errEndedTwice is what settling more credit than a reservation holds
// panics with: a token copied, or ended twice.
const errEndedTwice = "credit: a token from Acquire was ended twice, or more of it than it held (was it copied?)"

// ReturnPermits implements token.Owner: the credit goes back to the
// balance. A waiter at the front that it does not cover now needs less
// accrual, so it is woken to re-arm its timer.
func (r *reservation) ReturnPermits(n int64, _ uint32) {
	if n == 0 {
		return // a part for nothing, split off with Split(0)
	}
	r.mu.Lock()
	r.check(n)
	if n == r.tok.Permits() {
		r.tok.Release()
	} else {
		part, _ := r.tok.Split(n)
		part.Release()
	}
	r.mu.Unlock()
	if b := r.b; b.waiting.Load() != 0 {
		b.mu.Lock()
		b.pokeLocked()
		b.mu.Unlock()
	}
}

// ForgetPermits implements token.Owner: the credit is spent, which
// restarts accrual if it leaves a full bucket.
func (r *reservation) ForgetPermits(n int64, _ uint32) {
	if n == 0 {
		return
	}
	r.mu.Lock()
	r.check(n)
	if n == r.tok.Permits() {
		r.tok.Forget()
	} else {
		part, _ := r.tok.Split(n)
		part.Forget()
	}
	r.mu.Unlock()
	r.b.spent()
}

// SplitPermits implements token.Owner: both parts settle through r.
func (r *reservation) SplitPermits(_, _ int64, tag uint32) (token.Owner, uint32) { return r, tag }

// check panics, before anything changes, if the reservation holds fewer
// than n credits (none at all once its semaphore token has ended). It
// requires r.mu.
func (r *reservation) check(n int64) {
	if n > r.tok.Permits() {
		panic(errEndedTwice)
	}
}
