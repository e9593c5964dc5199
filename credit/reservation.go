package credit

import "github.com/atomicsem/atomicsem/token"

// reservation is the owner of the tokens that Acquire and TryAcquire
// return: it counts the credit of the reservation not yet settled, so that
// a copied token ended twice is caught, and settles it with the bucket's
// State. The parts of a split token share the reservation, and may be
// ended by different goroutines at once; the bucket's mu orders them.
type reservation struct {
	b    *Bucket
	left int64 // the credit not yet settled; guarded by b.mu
}

// errEndedTwice is what settling more credit than a reservation holds
// panics with: a token copied, or ended twice.
const errEndedTwice = "credit: a token from Acquire was ended twice, or more of it than it held (was it copied?)"

// ReturnPermits implements token.Owner: the credit goes back to the
// balance, and the waiter at the head looks again.
func (r *reservation) ReturnPermits(n int64, _ uint32) {
	if n == 0 {
		return // a part for nothing, split off with Split(0)
	}
	b := r.b
	b.mu.Lock()
	r.checkLocked(n)
	r.left -= n
	c := b.cfg
	b.st.Release(c, c.Now(), n)
	b.pokeLocked()
	b.mu.Unlock()
}

// ForgetPermits implements token.Owner: the credit is spent, which raises
// the ceiling the bucket accrues to, so the waiter at the head looks again.
func (r *reservation) ForgetPermits(n int64, _ uint32) {
	if n == 0 {
		return
	}
	b := r.b
	b.mu.Lock()
	r.checkLocked(n)
	r.left -= n
	c := b.cfg
	b.st.Forget(c, c.Now(), n)
	b.pokeLocked()
	b.mu.Unlock()
}

// SplitPermits implements token.Owner: both parts settle through r.
func (r *reservation) SplitPermits(_, _ int64, tag uint32) (token.Owner, uint32) { return r, tag }

// checkLocked panics, before anything changes and with b.mu released, if
// the reservation holds fewer than n credits. It requires b.mu.
func (r *reservation) checkLocked(n int64) {
	if n > r.left {
		r.b.mu.Unlock()
		panic(errEndedTwice)
	}
}

// noCredit is the owner of tokens for nothing.
type noCredit struct{}

func (noCredit) ReturnPermits(int64, uint32) {}
func (noCredit) ForgetPermits(int64, uint32) {}
func (c noCredit) SplitPermits(_, _ int64, tag uint32) (token.Owner, uint32) {
	return c, tag
}
