package event

import (
	"context"
	"sync/atomic"
	"unsafe"
)

// AutoReset is an event that releases one waiter per Set and then clears
// itself.
//
// Set wakes exactly one goroutine blocked in Wait or on C, or, when none is
// blocked, leaves the event set so that the next Wait returns at once. Sets
// do not count: two Sets with nobody waiting release one waiter, not two.
// Waiters never wake without a Set.
//
// The zero value is an unset event, ready to use. An AutoReset is one word.
// Its channel, its one allocation, is made by the first goroutine that waits
// on it (Wait or C); Set, TryWait and Reset never make it, and a Set that
// finds no channel only marks the event set. So the channel belongs to where
// its first waiter runs: an event set inside a testing/synctest bubble and
// waited on outside it, or the reverse, never has its waiter block on a
// channel of another bubble, which the runtime treats as a fatal error.
// (A goroutine outside a bubble must still not Set an event while a
// goroutine of the bubble is blocked on it, as it must not signal a
// sync.Cond there.) Nothing after the channel is made allocates. An
// AutoReset must not be copied after first use.
//
// Memory ordering: a Set synchronizes before the return of the Wait (or the
// receive from C, or the successful TryWait) that consumes it.
type AutoReset struct {
	_ noCopy
	// ch is nil (clear, no channel yet), setMark (set, no channel yet) or
	// the event's channel, a chan struct{} with a buffer of one whose full
	// buffer means "set". The channel is stored as its own pointer (see
	// chanPointer) rather than as a pointer to a copy of the channel value,
	// which would cost a second allocation per event.
	ch unsafe.Pointer // accessed only through sync/atomic
}

// setMark is the value of AutoReset.ch for an event set before any
// goroutine waited on it.
var setMark = unsafe.Pointer(new(byte))

// Set sets the event. If a goroutine is waiting, exactly one of them is
// released and the event is clear again; otherwise the event stays set until
// the next Wait, TryWait or Reset. Setting a set event does nothing.
func (e *AutoReset) Set() {
	if e == nil {
		panic(nilEvent("AutoReset.Set"))
	}
	for {
		switch p := atomic.LoadPointer(&e.ch); p {
		case setMark:
			return // already set: signals saturate
		case nil:
			// Nobody has waited yet: mark the event set and leave the
			// channel to its first waiter.
			if atomic.CompareAndSwapPointer(&e.ch, nil, setMark) {
				return
			}
		default:
			select {
			case pointerChan(p) <- struct{}{}:
			default: // already set: signals saturate
			}
			return
		}
	}
}

// Reset clears the event. A waiter released by an earlier Set is not
// affected; only a signal that nobody has consumed yet is discarded.
func (e *AutoReset) Reset() {
	if e == nil {
		panic(nilEvent("AutoReset.Reset"))
	}
	e.TryWait()
}

// TryWait consumes the signal if the event is set and reports whether it did.
// It never blocks.
func (e *AutoReset) TryWait() bool {
	if e == nil {
		panic(nilEvent("AutoReset.TryWait"))
	}
	for {
		switch p := atomic.LoadPointer(&e.ch); p {
		case nil:
			return false
		case setMark:
			if atomic.CompareAndSwapPointer(&e.ch, setMark, nil) {
				return true
			}
		default:
			select {
			case <-pointerChan(p):
				return true
			default:
				return false
			}
		}
	}
}

// Wait blocks until the event is set, consumes the signal and returns nil.
//
// If ctx is done before the signal arrives, Wait returns ctx.Err() and
// consumes nothing: a Set that races the cancellation stays pending for the
// next waiter. A ctx that is already done fails at once, even if the event is
// set.
func (e *AutoReset) Wait(ctx context.Context) error {
	if e == nil {
		panic(nilEvent("AutoReset.Wait"))
	}
	if ctx == nil {
		panic(nilContext("AutoReset.Wait"))
	}
	return waitOn(ctx, e.channel())
}

// C returns the event's channel, for use in a select statement, making it
// if nobody has waited yet. A receive from C consumes the signal exactly as
// a successful Wait does. The channel is the same for the life of the event
// and is never closed.
func (e *AutoReset) C() <-chan struct{} {
	if e == nil {
		panic(nilEvent("AutoReset.C"))
	}
	return e.channel()
}

// channel returns the event's channel, making it on first use.
func (e *AutoReset) channel() chan struct{} {
	p := atomic.LoadPointer(&e.ch)
	if p == nil || p == setMark {
		p = e.initChannel()
	}
	return pointerChan(p)
}

// initChannel makes the channel on first use, carrying over a signal that
// Set left before it, and returns its pointer. If several goroutines race
// to make it, one CompareAndSwap wins and the others use the winner's
// channel, so every caller sees the same one. It is kept out of channel
// because it runs once per event, and channel on every call.
func (e *AutoReset) initChannel() unsafe.Pointer {
	c := make(chan struct{}, 1)
	p := chanPointer(c)
	for {
		switch old := atomic.LoadPointer(&e.ch); old {
		case nil:
			if atomic.CompareAndSwapPointer(&e.ch, nil, p) {
				return p
			}
		case setMark:
			c <- struct{}{} // the pending signal moves into the buffer
			if atomic.CompareAndSwapPointer(&e.ch, setMark, p) {
				return p
			}
			<-c // consumed or overtaken meanwhile: look again
		default:
			return old // another goroutine won the race
		}
	}
}

// chanPointer and pointerChan convert between a channel and the pointer it
// is made of, so that an atomic pointer can hold the channel itself.
//
// This is sound because a channel value is exactly one pointer, to the
// runtime's channel record (the compile-time checks below fail the build on
// any platform where the sizes differ), and that record is a heap object
// like any other: while ch holds its address, the garbage collector sees an
// ordinary unsafe.Pointer to it and keeps it alive. The conversions copy the
// pointer word unchanged, so pointerChan(chanPointer(c)) == c. The channel is
// fully made before the CompareAndSwap that publishes it, and the Load that
// reads it back is atomic, so every goroutine that sees the pointer sees an
// initialised channel.
func chanPointer(c chan struct{}) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&c))
}

func pointerChan(p unsafe.Pointer) chan struct{} {
	return *(*chan struct{})(unsafe.Pointer(&p))
}

// A channel and an unsafe.Pointer must have the same size for chanPointer
// and pointerChan to be exact; each constant overflows uintptr, and so fails
// to compile, if one is larger than the other.
const (
	_ = unsafe.Sizeof(chan struct{}(nil)) - unsafe.Sizeof(unsafe.Pointer(nil))
	_ = unsafe.Sizeof(unsafe.Pointer(nil)) - unsafe.Sizeof(chan struct{}(nil))
)
