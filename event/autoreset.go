package event

import (
	"context"

	"go.uber.org/atomic"
)

// AutoReset is an event that releases one waiter per Set and then clears
// itself.
//
// Set wakes exactly one goroutine blocked in Wait or on C, or, when none is
// blocked, leaves the event set so that the next Wait returns at once. Sets
// do not count: two Sets with nobody waiting release one waiter, not two.
// Waiters never wake without a Set.
//
// The zero value is an unset event, ready to use. An AutoReset must not be
// copied after first use.
//
// Memory ordering: a Set synchronizes before the return of the Wait (or the
// receive from C, or the successful TryWait) that consumes it.
type AutoReset struct {
	_ noCopy
	// ch holds at most one token: a full buffer means "set". It is created
	// on first use so that the zero value works.
	ch atomic.Pointer[chan struct{}]
}

// Set sets the event. If a goroutine is waiting, exactly one of them is
// released and the event is clear again; otherwise the event stays set until
// the next Wait, TryWait or Reset. Setting a set event does nothing.
func (e *AutoReset) Set() {
	select {
	case e.channel() <- struct{}{}:
	default: // already set: signals saturate
	}
}

// Reset clears the event. A waiter released by an earlier Set is not
// affected; only a signal that nobody has consumed yet is discarded.
func (e *AutoReset) Reset() {
	select {
	case <-e.channel():
	default:
	}
}

// TryWait consumes the signal if the event is set and reports whether it did.
// It never blocks.
func (e *AutoReset) TryWait() bool {
	select {
	case <-e.channel():
		return true
	default:
		return false
	}
}

// Wait blocks until the event is set, consumes the signal and returns nil.
//
// If ctx is done before the signal arrives, Wait returns ctx.Err() and
// consumes nothing: a Set that races the cancellation stays pending for the
// next waiter. A ctx that is already done fails at once, even if the event is
// set.
func (e *AutoReset) Wait(ctx context.Context) error {
	done := ctx.Done()
	select {
	case <-done:
		return ctx.Err()
	default:
	}
	select {
	case <-e.channel():
		return nil
	case <-done:
		return ctx.Err()
	}
}

// C returns the event's channel, for use in a select statement. A receive
// from C consumes the signal exactly as a successful Wait does. The channel
// is the same for the life of the event and is never closed.
func (e *AutoReset) C() <-chan struct{} {
	return e.channel()
}

func (e *AutoReset) channel() chan struct{} {
	if p := e.ch.Load(); p != nil {
		return *p
	}
	return e.initChannel()
}

// initChannel is outlined so that channel can be inlined.
func (e *AutoReset) initChannel() chan struct{} {
	c := make(chan struct{}, 1)
	if e.ch.CompareAndSwap(nil, &c) {
		return c
	}
	return *e.ch.Load() // another goroutine won the race
}
