package keyed

import (
	"context"
	"time"
)

// waitLine is the line of Spend and Acquire calls waiting on one key of a
// Limiter, in arrival order. It lives in the shard's lines while it is not
// empty; all of it is guarded by the shard's lock.
//
// Only the waiter at the front sleeps on a timer, set for the moment its
// credit will have accrued; the others sleep until they reach the front.
// The front waiter takes its own credit when it wakes, with
// credit.State.TrySpendSince (TryReserveSince for an Acquire) from the
// moment it reached the front, so credit that accrued while it was waking
// is not lost. A waiter whose
// context is done leaves the line at once and, if it was at the front,
// hands the front to the next.
type waitLine struct {
	head, tail *waiter
}

type waiter struct {
	n          int64
	reserve    bool
	since      int64 // when it reached the front, on the Config's clock
	prev, next *waiter
	wake       chan struct{} // a token: look again
}

// poke tells w to look again, without blocking.
func (w *waiter) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// join puts a waiter for n credits at the end of key's line. It requires
// that sh is locked.
func join(sh *limShard, key string, n int64, reserve bool, now int64) *waiter {
	w := &waiter{n: n, reserve: reserve, since: now, wake: make(chan struct{}, 1)}
	if sh.lines == nil {
		sh.lines = make(map[string]*waitLine)
	}
	line := sh.lines[key]
	if line == nil {
		sh.lines[key] = &waitLine{head: w, tail: w}
		return w
	}
	w.prev = line.tail
	line.tail.next = w
	line.tail = w
	return w
}

// leave takes w out of key's line and, if it was at the front, makes the
// next waiter the front from now; the entry of a key whose line empties
// may be droppable sooner. It requires that sh is locked.
func (l *Limiter) leave(sh *limShard, key string, hi uint32, w *waiter, now int64) {
	line := sh.lines[key]
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		line.head = w.next
		if w.next != nil {
			w.next.since = now
			w.next.poke()
		}
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		line.tail = w.prev
	}
	if line.head == nil {
		delete(sh.lines, key)
		i, _ := sh.find(key, hi) // present: a key with a line is not dropped
		l.lowerDue(sh, i, now)
	}
}

// wait waits in key's line until w takes its credit, or ctx is done.
func (l *Limiter) wait(ctx context.Context, sh *limShard, key string, hi uint32, w *waiter) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var fire <-chan time.Time
		sh.mu.Lock()
		if sh.lines[key].head == w {
			// The front: take the credit if it has accrued, else sleep
			// until it will have.
			st := &entry(sh, key, hi).st // present: a key with a line is not dropped
			now := l.cfg.Now()
			var ok bool
			if w.reserve {
				ok = st.TryReserveSince(l.cfg, w.since, now, w.n)
			} else {
				ok = st.TrySpendSince(l.cfg, w.since, now, w.n)
			}
			if ok {
				l.leave(sh, key, hi, w, now)
				sh.mu.Unlock()
				return nil
			}
			if d, ok := st.Wait(l.cfg, now, w.n); ok {
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				fire = timer.C
			}
		}
		sh.mu.Unlock()
		select {
		case <-w.wake:
		case <-fire:
		case <-ctx.Done():
			sh.mu.Lock()
			l.leave(sh, key, hi, w, l.cfg.Now())
			sh.mu.Unlock()
			return ctx.Err()
		}
	}
}
