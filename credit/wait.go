package credit

import (
	"context"

	"github.com/atomicsem/atomicsem/token"
)

// Waiting.
//
// A Spend or Acquire that the balance cannot cover queues on line, a FIFO
// lock of one permit, behind the ones already waiting; the holder of line
// is the waiter at the front, and the only one that does more than wait
// for its turn. It settles the accrual, takes its credit if it is there,
// and otherwise parks in the credit semaphore's own Acquire with a context
// that expires when its credit will have accrued. So one timer is armed
// per bucket, by the waiter it serves, and no goroutine runs on the
// bucket's behalf. The park ends in one of three ways: credit given back by
// a token's Release is handed to it by the semaphore (it parks for exactly
// its credit, so a release that covers it serves it at once); its timer
// expires, and it settles the accrual again; or something that changes the
// accrual (SetRate, a spend that restarts accrual in a full bucket) pokes
// it through the same context, and it looks again. Its own context ending
// ends the wait: the semaphore withdraws it and the timer is stopped.
//
// waiting counts the callers in line, the front one included, so that the
// fast paths, which never take the lock, can refuse to overtake them.

// wait takes n credits for the caller once it is at the front of the
// line, as a spend (spend true) or a reservation, whose token it returns.
func (b *Bucket) wait(ctx context.Context, n int64, spend bool) (token.Token, error) {
	b.waiting.Add(1)
	defer b.waiting.Add(-1)
	turn, err := b.line.Acquire(ctx, 1)
	if err != nil {
		return token.Token{}, err
	}
	defer turn.Release()
	for {
		b.mu.Lock()
		if spend {
			if b.settleLocked(n) {
				b.mu.Unlock()
				return token.Token{}, nil
			}
		} else {
			b.settleLocked(0)
			if r := b.tryReserve(n); r != nil {
				b.mu.Unlock()
				return token.New(r, n, 0), nil
			}
		}
		var park context.Context
		var cancel context.CancelFunc
		if at, ok := b.wakeLocked(n); ok {
			park, cancel = context.WithDeadline(ctx, at)
		} else {
			park, cancel = context.WithCancel(ctx)
		}
		b.poke = cancel
		b.mu.Unlock()

		r := &reservation{b: b}
		r.tok, err = b.sem.Acquire(park, n)

		b.mu.Lock()
		b.poke = nil
		b.mu.Unlock()
		cancel()
		switch {
		case err == nil && spend:
			r.tok.Forget()
			b.spent()
			return token.Token{}, nil
		case err == nil:
			return token.New(r, n, 0), nil
		case ctx.Err() != nil:
			return token.Token{}, ctx.Err()
		case park.Err() == nil:
			return token.Token{}, err // not the park's end: nothing else fails it
		}
	}
}
