package atomicsem

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/atomicsem/atomicsem/event"
	"github.com/atomicsem/atomicsem/token"
)

// waitStatus says how a parked waiter's wait ended. It is written under the
// semaphore's mu before the waiter's event is set, so the waiter may read it
// without the lock once it has consumed the event.
type waitStatus uint32

const (
	waiting waitStatus = iota // queued, nothing decided
	granted                   // the permits were handed to the waiter
	woken                     // barging mode: permits are free, compete for them
	closed                    // Close ran; the waiter gets ErrClosed
)

// waiter is a parked Acquire. Each semaphore keeps a free list of waiter
// records, so parking allocates nothing in steady state.
//
// A waiter granted its permits by hand-off keeps its record until it
// releases them: the record becomes its token's owner (see grantedOwner),
// and the Release, which takes the queue lock to hand the permits on in any
// case while others wait, puts the record back on the free list under that
// lock. So in the contended case the free list costs no atomic operations.
// The token carries the record's generation, which the token's end claims
// and advances; a copy of the token, or a second end racing the first,
// finds the generation moved and is refused before it changes anything, so
// a record can never go back to the free list while another Acquire is
// parked on it.
//
// A parked Acquire costs this record plus its event's channel, so the record
// is kept to the allocator's 48-byte size class on 64-bit platforms: the
// arrival time is one int64 rather than a time.Time, the request and the
// status share one 32-bit field, and the generation is an atomic.Uint32,
// whose alignment is 4.
type waiter struct {
	prev, next *waiter    // queue links, or the free-list link; guarded by mu
	sem        *Semaphore // the semaphore whose free list the record belongs to
	arrival    int64      // when first queued, as nanoseconds since epoch; barging mode only
	ready      event.AutoReset
	nstatus    uint32        // the request in the low 30 bits, the status above; guarded by mu
	gen        atomic.Uint32 // advanced by each end of a token that owns the record
}

const statusShift = 30

// want returns the number of permits w requested.
func (w *waiter) want() int64 { return int64(w.nstatus & (1<<statusShift - 1)) }

// status returns how w's wait ended, or waiting.
func (w *waiter) status() waitStatus { return waitStatus(w.nstatus >> statusShift) }

// setStatusLocked records how w's wait ended. It requires that mu is held.
func (w *waiter) setStatusLocked(st waitStatus) {
	w.nstatus = w.nstatus&(1<<statusShift-1) | uint32(st)<<statusShift
}

// epoch is the origin of waiter arrival times. time.Since(epoch) reads the
// monotonic clock, so waiting times are immune to changes of the wall clock.
// (In a testing/synctest bubble, time.Since reads the bubble's fake clock,
// without a monotonic reading; differences of two such readings taken in one
// bubble are still exact.)
var epoch = time.Now()

// waitedFor returns how long w has waited since its arrival was stamped.
func (w *waiter) waitedFor() time.Duration {
	return time.Since(epoch) - time.Duration(w.arrival)
}

// inBubble reports whether the calling goroutine runs in a testing/synctest
// bubble, where every channel it parks on must have been made in the same
// bubble: the runtime stops the process if a goroutine uses a channel of
// another bubble, and does not count a goroutine parked on a channel made
// outside its bubble as durably blocked, which stalls the bubble's clock.
//
// Outside a bubble, time.Since(epoch) reads the monotonic clock, and is
// never negative. In a bubble, time.Now carries no monotonic reading, so
// Since compares wall clocks: the bubble's starts at midnight UTC on
// 2000-01-01, before epoch, which was read at package initialization,
// outside every bubble. (A bubble whose fake clock has been moved past the
// process's start, decades of fake time, is taken for the outside, and a
// semaphore shared between it and the outside is then not safe.) It is one
// read of the monotonic clock, made only by an Acquire about to park; no
// cheaper way to tell a bubble exists outside the runtime, and a test binary
// pays exactly what a production binary does.
func inBubble() bool {
	return time.Since(epoch) < 0
}

// A waiter's life. Acquire queues a record (queueBehind, acquireSlow) and
// parks on its event in Acquire itself, since a goroutine woken from a park
// pays for each frame it returns through. A dispatch (walkLocked) or a
// hand-off (handOff) takes it off the queue and sets its event, granted or
// woken; Close sets it closed. What happens next is here: withdraw when the
// waiter's ctx is done, resolveWake after a wake-up that is not a grant,
// claim and recycle when the token of a granted waiter ends, and the free
// list the record goes back to.

// withdraw takes a parked waiter whose ctx is done off the semaphore. woke says whether
// Acquire has already consumed the waiter's wake-up.
//
// A waiter granted its permits in a race with its ctx may not have been
// woken yet: handOff sets the event of a waiter it granted only after it
// releases mu. The waiter then receives that wake-up here, without the
// lock, before anything else is done with its record; otherwise the
// wake-up could land on the record after it was recycled, and wake the
// next Acquire to park on it. The wait is short: the releaser sets the
// event next, and waits for nothing before it does.
func (s *Semaphore) withdraw(ctx context.Context, w *waiter, woke, bubbled bool) (token.Token, error) {
	s.mu.Lock()
	if !woke && w.status() == granted && !w.ready.TryWait() {
		s.mu.Unlock()
		<-w.ready.C()
		s.mu.Lock()
	}
	s.cancelLocked(w)
	if !bubbled {
		s.free.putLocked(w)
	}
	s.mu.Unlock()
	return token.Token{}, ctx.Err()
}

// cancelLocked withdraws a waiter whose ctx is done, leaving the semaphore
// as if the waiter had never arrived, and leaves w's event clear. It
// requires that s.mu is held and, if w was granted its permits, that its
// wake-up has been consumed (see withdraw).
func (s *Semaphore) cancelLocked(w *waiter) {
	switch w.status() {
	case waiting:
		s.removeLocked(w)
	case granted:
		// The grant raced the cancellation: return the permits and serve
		// the queue with them in one CAS.
		s.releaseLocked(w.want())
		return
	case woken:
		// The wake-up was meant for w; pass it on.
		s.queue.woken--
		w.ready.TryWait()
	case closed:
		w.ready.TryWait()
		return
	}
	// Removing w may let the waiters behind it fit, and the queue state
	// must stop counting it.
	s.releaseLocked(0)
}

// resolveWake acts on a wake-up other than a hand-off's grant. After Close
// it returns ErrClosed. A waiter woken to compete for free permits (barging
// mode) takes them, or queues again in its place by arrival, keeping its
// waiting time; resolveWake reports whether it took them. Either way the
// waiter has settled, and serves the queue in its turn: it wakes the next
// round if permits are left free, or leaves the word eligible so that the
// next release does (see dispatch.go). The record goes back to the free
// list unless the waiter queues again or parks in a bubble.
func (s *Semaphore) resolveWake(w *waiter, bubbled bool) (took bool, err error) {
	if w.status() == closed {
		if !bubbled {
			s.recycle(w)
		}
		return false, ErrClosed
	}
	s.mu.Lock()
	s.queue.woken-- // settled, whichever way
	took, err = s.takeOrQueueLocked(w.want(), w)
	if err == nil && s.load().Available() > 0 {
		// Permits are left free: wake the next round for them (see
		// dispatch.go). With none free, takeOrQueueLocked has made the
		// word eligible again if a waiter fits, so that the next release
		// wakes one.
		s.releaseLocked(0)
	}
	if (took || err != nil) && !bubbled {
		s.free.putLocked(w)
	}
	s.mu.Unlock()
	return took, err
}

// claim takes w back from the token issued with tag, which must be the
// only end of that token, and advances w's generation so that no other can
// follow. A second end (of a copy, or racing the first) finds the
// generation moved and panics before it changes anything: a record must
// never go back to the free list twice, or while another Acquire is parked
// on it, which would hand one event to two waiters.
func (w *waiter) claim(tag uint32) {
	if !w.gen.CompareAndSwap(tag, tag+1) {
		panic(errTokenEndedTwice)
	}
}

// recycle puts rec, a record coming back with its token's permits, on the
// free list; rec may be nil. Returning permits never waits for the lock
// only to recycle: a record that finds the lock busy goes on the free
// list's lock-free spill stack instead.
func (s *Semaphore) recycle(rec *waiter) {
	switch {
	case rec == nil:
	case s.mu.TryLock():
		s.free.putLocked(rec)
		s.mu.Unlock()
	default:
		s.free.putSpill(rec)
	}
}

// maxFreeWaiters caps a semaphore's free list. Records beyond it are left to
// the garbage collector, so a burst of parked goroutines does not pin its
// peak memory for the semaphore's lifetime.
const maxFreeWaiters = 1024

// waiterFreeList recycles waiter records together with their events'
// channels. It is per semaphore rather than a global sync.Pool, and holds
// only records whose channels were made outside testing/synctest bubbles: a
// waiter parking in a bubble gets a record of its own, which is never
// recycled (see inBubble).
//
// Records come back under the semaphore's mu, onto a plain stack, except
// when a token's Release finds mu busy: that release does not wait, and
// pushes the record onto spill, a lock-free stack, instead. Records are
// taken only under mu, from the plain stack first. With that single
// consumer no record can leave spill and come back between a pop's load and
// its CAS, so spill is free of the ABA problem. The plain stack keeps at
// most maxFreeWaiters records, spill about as many (see putSpill).
type waiterFreeList struct {
	head *waiter // guarded by mu
	len  int     // guarded by mu

	spill    atomic.Pointer[waiter]
	spillLen atomic.Int32 // approximate: only enforces maxFreeWaiters
}

// getLocked returns a record of s for n permits: a fresh one if the caller
// parks in a bubble, else one recycled if one is free. It requires that mu
// is held.
func (l *waiterFreeList) getLocked(s *Semaphore, n int64, bubbled bool) *waiter {
	var w *waiter
	switch {
	case bubbled:
	case l.head != nil:
		w = l.head
		l.head = w.next
		l.len--
	default:
		w = l.popSpillLocked()
	}
	if w == nil {
		w = &waiter{sem: s}
	}
	w.next = nil
	w.nstatus = uint32(n) // n ≤ MaxPermits, status waiting
	return w
}

// putLocked requires that mu is held, w is off the queue, its event is
// clear, and its channel was not made in a bubble.
func (l *waiterFreeList) putLocked(w *waiter) {
	if l.len >= maxFreeWaiters {
		return // left to the garbage collector
	}
	w.next = l.head
	l.head = w
	l.len++
}

// putSpill is putLocked for a caller that does not hold mu.
func (l *waiterFreeList) putSpill(w *waiter) {
	if l.spillLen.Load() >= maxFreeWaiters {
		return // left to the garbage collector
	}
	l.spillLen.Add(1)
	for {
		head := l.spill.Load()
		w.next = head
		if l.spill.CompareAndSwap(head, w) {
			return
		}
	}
}

// popSpillLocked takes a record from spill, or returns nil. It requires mu.
func (l *waiterFreeList) popSpillLocked() *waiter {
	for {
		w := l.spill.Load()
		if w == nil {
			return nil
		}
		if l.spill.CompareAndSwap(w, w.next) {
			l.spillLen.Add(-1)
			return w
		}
	}
}
