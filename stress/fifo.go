package main

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/atomicsem/atomicsem/token"
)

// fifoStats count what the FIFO rounds checked.
type fifoStats struct {
	rounds, waiters, steps int
}

// fifoWaiter is one Acquire of a FIFO round.
type fifoWaiter struct {
	n    int64
	tok  token.Token
	err  error
	done chan struct{}
}

func (w *fifoWaiter) returned() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// fifoRound checks the grant order on the quiet semaphore: it takes every
// permit as single tokens, parks a known sequence of waiters of mixed
// weights, then gives the permits back one at a time. After each, exactly
// the waiters that the permits given back so far serve, in arrival order,
// must have returned. It requires that the workers are at rest.
func (r *runner) fifoRound(rng *rand.Rand) {
	c := &r.checks.fifoOrder
	k := r.cfg.max
	r.limitMu.Lock()
	r.setLimitLocked(k)
	r.limitMu.Unlock()

	var units []*token.Token
	defer func() {
		for _, u := range units {
			u.Release()
		}
	}()
	for range k {
		tok := new(token.Token)
		var ok bool
		if *tok, ok = r.sem.TryAcquire(1); !ok {
			c.failf("FIFO round: TryAcquire(1) failed on a quiet semaphore, %+v", r.sem.Stats())
			return
		}
		units = append(units, tok)
	}

	// Weights that add up to at most k, so that every waiter is served.
	var weights []int64
	for sum := int64(0); len(weights) < 8; {
		n := 1 + rng.Int64N(min(k, 4))
		if sum+n > k {
			break
		}
		weights = append(weights, n)
		sum += n
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ws []*fifoWaiter
	defer func() {
		cancel()
		for _, w := range ws {
			<-w.done
			if w.err == nil {
				w.tok.Release()
			}
		}
	}()
	for i, n := range weights {
		w := &fifoWaiter{n: n, done: make(chan struct{})}
		go func() {
			defer close(w.done)
			w.tok, w.err = r.sem.Acquire(ctx, n)
		}()
		ws = append(ws, w)
		if !waitUntil(func() bool { return r.sem.Stats().Waiters == i+1 }) {
			c.failf("FIFO round: waiter %d of %d permits not queued after %v, %+v", i, n, stuckAfter, r.sem.Stats())
			return
		}
	}

	// free and served model the queue: the permits given back and not yet
	// granted, and how many waiters from the front have been served.
	free, served := int64(0), 0
	for len(units) > 0 {
		u := units[len(units)-1]
		units = units[:len(units)-1]
		u.Release()
		free++
		for served < len(ws) && ws[served].n <= free {
			free -= ws[served].n
			served++
		}
		r.fifo.steps++
		if !c.expect(r.returnedExactly(ws, served), "FIFO round, weights %v: after %d of %d permits back, want waiters [0, %d) granted, got %s",
			weights, int(k)-len(units), k, served, returnedSet(ws)) {
			return
		}
	}
	for _, w := range ws {
		c.expect(w.err == nil && w.tok.Permits() == w.n,
			"FIFO round: waiter for %d permits returned %v with a token for %d", w.n, w.err, w.tok.Permits())
	}
	r.fifo.rounds++
	r.fifo.waiters += len(ws)
}

// returnedExactly waits for the first served waiters to return and reports
// whether they, and none of the others, have.
func (r *runner) returnedExactly(ws []*fifoWaiter, served int) bool {
	for _, w := range ws[:served] {
		if !waitTimeout(func() { <-w.done }, stuckAfter) {
			return false
		}
	}
	for _, w := range ws[served:] {
		if w.returned() {
			return false
		}
	}
	return true
}

func returnedSet(ws []*fifoWaiter) string {
	var idx []int
	for i, w := range ws {
		if w.returned() {
			idx = append(idx, i)
		}
	}
	return fmt.Sprint(idx)
}
