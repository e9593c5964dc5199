package credit

import (
	"context"
	"runtime"
	"time"

	"github.com/atomicsem/atomicsem/token"
)

// Waiting.
//
// A Spend or Acquire that the balance cannot cover joins the line, a list
// under mu, behind the ones already waiting; TrySpend, TryAcquire and the
// fast paths refuse while the line is not empty, so nobody overtakes it.
// The waiter at the head is the only one that watches the accrual: it asks
// the State how long until accrual covers it, and parks for that long on a
// timer of its own; the others park until they reach the head. The park
// ends in one of three ways: the timer fires and the head looks again;
// something that changes the accrual (credit given back, a reservation
// spent, SetRate, the head before it leaving) signals its channel and it
// looks again; or its context ends, and it leaves the line, handing the
// head to the next.
//
// Every channel and timer a waiter parks on is made by its own goroutine,
// so a bucket shared by goroutines in and out of testing/synctest bubbles
// never has a goroutine wait on another bubble's timer. (A signal sent to
// a waiter in a bubble by a goroutine outside it is still a cross-bubble
// channel operation, which the runtime forbids: a bubble's waiters are
// woken by their own timers and by goroutines of their bubble.)
//
// Pacing. The head takes its credit with State.TrySpendSince: as of the
// moment it accrued, not the moment the head woke, so a stream of Spends
// whose every call waits keeps the rate however late the runtime wakes
// each one, provided the next call comes before the next credit is due.
// The runtime's timers fire up to about a millisecond late when the
// process is otherwise idle (they are driven by the network poller's
// millisecond timeout), which is longer than the period of any rate above
// a thousand a second. So outside a bubble, the head parks on its timer
// only until spinWindow before its credit is due, and yields the processor
// in a loop for the rest, reading the clock: at rates of thousands a second
// the head keeps a processor busy, and the stream keeps its rate. In a
// bubble time is fake and timers are exact, and a goroutine that yields
// would keep the bubble's clock from moving, so there the head parks for
// the whole wait.

// spinWindow is how long before its credit is due the head stops parking
// on its timer and yields instead: more than the runtime's timers are late
// by when the process is idle.
const spinWindow = 2 * time.Millisecond

// waiter is a Spend or Acquire in the line.
type waiter struct {
	n     int64
	next  *waiter // guarded by mu
	since int64   // at the head: the moment from which its credit may be taken; guarded by mu
	// wake is signalled when the waiter reaches the head or the accrual
	// changes; one slot, so that a signal is never lost and the signaller
	// never blocks. Made by the waiter's goroutine.
	wake chan struct{}
}

// wait takes n credits for the caller, as a spend (spend true) or a
// reservation, whose token it returns, once it is at the head of the line
// and its credit is there. It requires b.mu, and releases it.
func (b *Bucket) wait(ctx context.Context, n int64, spend bool) (token.Token, error) {
	w := &waiter{n: n, wake: make(chan struct{}, 1)}
	c := b.cfg
	w.since = c.Now()
	if b.tail == nil {
		b.head = w
	} else {
		b.tail.next = w
	}
	b.tail = w
	b.waiters++

	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	bubbled := inBubble()
	for {
		// b.mu is held here.
		var due time.Duration
		timed := false
		if b.head == w {
			c = b.cfg
			now := c.Now()
			// Is the credit there, as of the moment it accrued?
			var at int64
			var took bool
			if spend {
				at, took = b.st.take(c, w.since, now, n)
			} else {
				at, took = b.st.reserve(c, w.since, now, n)
			}
			if took {
				b.leaveLocked(w, at)
				b.mu.Unlock()
				if spend {
					return token.Token{}, nil
				}
				return token.New(&reservation{b: b, left: n}, n, 0), nil
			}
			w.since = now
			due, timed = b.st.Wait(c, now, n)
		}
		b.mu.Unlock()

		woken := w.park(ctx, due, timed, bubbled, &timer)

		b.mu.Lock()
		if !woken && ctx.Err() != nil {
			b.leaveLocked(w, b.cfg.Now())
			b.mu.Unlock()
			return token.Token{}, ctx.Err()
		}
	}
}

// park waits until w is signalled, its context ends, or, if timed, due
// has passed, and reports whether it was signalled or due passed (false:
// the context ended). The timer is made, the first time it is needed, by
// the waiter's own goroutine and kept in *t.
func (w *waiter) park(ctx context.Context, due time.Duration, timed, bubbled bool, t **time.Timer) bool {
	if timed && !bubbled && due <= spinWindow {
		return w.spin(ctx, due)
	}
	var fire <-chan time.Time
	if timed {
		if !bubbled {
			due -= spinWindow
		}
		if *t == nil {
			*t = time.NewTimer(due)
		} else {
			(*t).Reset(due)
		}
		fire = (*t).C
	}
	select {
	case <-w.wake:
		return true
	case <-fire:
		return true
	case <-ctx.Done():
		return false
	}
}

// spin naps until due has passed, w is signalled or the context ends, and
// reports which as park does.
func (w *waiter) spin(ctx context.Context, due time.Duration) bool {
	end := time.Now().Add(due)
	for {
		left := time.Until(end)
		if left <= 0 {
			return true
		}
		select {
		case <-w.wake:
			return true
		case <-ctx.Done():
			return false
		default:
		}
		if left > napSlack {
			nap(left - napSlack)
		} else {
			runtime.Gosched()
		}
	}
}

// napSlack is how late a nap may end (the kernel's default timer slack is
// 50 µs): the last stretch of a wait shorter than this is spent yielding.
const napSlack = 60 * time.Microsecond

// napMax bounds one nap, and so how late a napping waiter notices its
// channel or its context.
const napMax = time.Millisecond

// leaveLocked takes w out of the line and, if it was the head, makes the
// next waiter the head, its credit to be taken from the moment at on. It
// requires b.mu.
func (b *Bucket) leaveLocked(w *waiter, at int64) {
	b.waiters--
	if b.head == w {
		b.head = w.next
		if b.head == nil {
			b.tail = nil
			return
		}
		b.head.since = at
		signal(b.head)
		return
	}
	for p := b.head; p != nil; p = p.next {
		if p.next == w {
			p.next = w.next
			if b.tail == w {
				b.tail = p
			}
			return
		}
	}
}

// pokeLocked signals the head, if any, to look at the accrual again. It
// requires b.mu.
func (b *Bucket) pokeLocked() {
	if b.head != nil {
		signal(b.head)
	}
}

func signal(w *waiter) {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// inBubble reports whether the calling goroutine runs in a testing/synctest
// bubble: there the clock carries no monotonic reading, and outside one it
// always does.
func inBubble() bool {
	now := time.Now()
	return now == now.Round(0)
}
