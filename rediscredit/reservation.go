package rediscredit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/atomicsem/atomicsem/token"
)

// A Reservation is credit held in a bucket by TryReserve until it is
// settled: Settle spends part of it and gives the rest back in one round
// trip, for work whose cost is known only once it is done. Reserved credit
// counts against the burst until then, and credit given back never takes
// the bucket above it.
//
// A reservation that is not settled within the Limiter's hold (see
// WithHold) of the last call to its key may be dropped by Redis with the
// key, and so count as given back.
type Reservation struct {
	l     *Limiter
	key   string
	n     int64
	state atomic.Int32 // 0 open, 1 settling, 2 settled
	local *token.Token // the fallback's reservation, when Redis was unavailable
}

// TryReserve reserves n credits of key's bucket if its balance covers them
// now, in one round trip, and returns the Reservation (nil if it did not)
// and the Result. It fails as TrySpend does, reserving nothing;
// TryReserve(ctx, key, 0) returns a Reservation of no credit, whose Settle
// changes nothing.
func (l *Limiter) TryReserve(ctx context.Context, key string, n int64) (*Reservation, Result, error) {
	if err := l.check("TryReserve", ctx, n); err != nil {
		return nil, Result{}, err
	}
	if n == 0 {
		res, err := l.nothing(ctx, key)
		if err != nil {
			return nil, Result{}, err
		}
		return &Reservation{l: l, key: key}, res, nil
	}
	tctx, cancel := l.trip(ctx)
	r, err := l.run(tctx, opReserve, key, n, 0, -1)
	cancel()
	if err != nil {
		if l.local != nil && errors.Is(err, ErrUnavailable) {
			return l.local.tryReserve(l, key, n, err)
		}
		return nil, Result{}, err
	}
	res := r.result()
	if !res.OK {
		return nil, res, nil
	}
	return &Reservation{l: l, key: key, n: n}, res, nil
}

// Credit returns the credit the reservation holds.
func (r *Reservation) Credit() int64 { r.valid("Credit"); return r.n }

// valid panics, naming op, if r is nil: a caller that did not check
// TryReserve's result, which is nil when nothing was reserved.
func (r *Reservation) valid(op string) {
	if r == nil {
		panic("rediscredit: " + op + " on a nil *Reservation")
	}
}

// Settle spends spent credits of the reservation for good and gives the
// rest back, in one round trip, and ends the reservation. The Result is the
// bucket after it.
//
// On failure (a done ctx, Redis unavailable) the reservation stays open and
// Settle may be called again. It is a run-time error if spent is outside
// [0, Credit()] or if the reservation was already settled.
func (r *Reservation) Settle(ctx context.Context, spent int64) (Result, error) {
	r.valid("Settle")
	if ctx == nil {
		panic("rediscredit: nil Context")
	}
	if spent < 0 || spent > r.n {
		panic(fmt.Sprintf("rediscredit: settling %d credits of a reservation of %d", spent, r.n))
	}
	if !r.state.CompareAndSwap(0, 1) {
		panic("rediscredit: a reservation was settled twice")
	}
	if r.local != nil {
		switch spent {
		case r.n:
			r.local.Forget()
		case 0:
			r.local.Release()
		default:
			part, _ := r.local.Split(spent)
			part.Forget()
			r.local.Release()
		}
		r.state.Store(2)
		return Result{OK: true, Time: time.Now(), Local: true}, nil
	}
	if err := ctx.Err(); err != nil {
		r.state.Store(0)
		return Result{}, err
	}
	rep, err := r.l.run(ctx, opSettle, r.key, r.n-spent, spent, -1)
	if err != nil {
		r.state.Store(0)
		return Result{}, err
	}
	r.state.Store(2)
	res := rep.result()
	res.OK = true
	return res, nil
}

// Release gives all the credit back; it is shorthand for Settle(ctx, 0).
func (r *Reservation) Release(ctx context.Context) (Result, error) {
	r.valid("Release")
	return r.Settle(ctx, 0)
}

// Forget spends all the credit; it is shorthand for Settle(ctx, Credit()).
func (r *Reservation) Forget(ctx context.Context) (Result, error) {
	r.valid("Forget")
	return r.Settle(ctx, r.n)
}
