package event

import (
	"context"
	"sync"
)

// ManualReset is an event that, once set, releases every waiter, present and
// future, until it is Reset.
//
// The zero value is an unset event, ready to use. Its channel is made by
// the first goroutine that waits on it after each Reset (Wait or Done); Set
// and Reset never make one, so an event set inside a testing/synctest
// bubble can be waited on outside it, and the reverse. A ManualReset must
// not be copied after first use.
//
// Memory ordering: a Set synchronizes before the return of every Wait that it
// releases and of every IsSet that reports true because of it.
type ManualReset struct {
	_  noCopy
	mu sync.Mutex
	// ch is closed while the event is set, or nil until a waiter needs
	// it. Reset drops it, so a waiter that captured the old one is still
	// released by the Set it was waiting for, and the next waiter makes a
	// fresh one.
	ch  chan struct{}
	set bool
}

// Set sets the event, releasing every goroutine blocked in Wait or on Done.
// Setting a set event does nothing.
func (e *ManualReset) Set() {
	if e == nil {
		panic(nilEvent("ManualReset.Set"))
	}
	e.mu.Lock()
	if !e.set {
		if e.ch != nil {
			close(e.ch)
		}
		e.set = true
	}
	e.mu.Unlock()
}

// Reset clears the event. Goroutines that call Wait afterwards block until the
// next Set. Resetting a clear event does nothing.
func (e *ManualReset) Reset() {
	if e == nil {
		panic(nilEvent("ManualReset.Reset"))
	}
	e.mu.Lock()
	if e.set {
		e.ch = nil
		e.set = false
	}
	e.mu.Unlock()
}

// IsSet reports whether the event is set.
func (e *ManualReset) IsSet() bool {
	if e == nil {
		panic(nilEvent("ManualReset.IsSet"))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.set
}

// Wait blocks until the event is set and returns nil, or returns ctx.Err()
// if ctx is done first. A ctx that is already done fails at once, even if the
// event is set.
func (e *ManualReset) Wait(ctx context.Context) error {
	if e == nil {
		panic(nilEvent("ManualReset.Wait"))
	}
	if ctx == nil {
		panic(nilContext("ManualReset.Wait"))
	}
	return waitOn(ctx, e.Done())
}

// Done returns a channel that is closed when the event is set, for use in a
// select statement. After a Reset, Done returns a new channel; a channel
// returned earlier stays closed.
func (e *ManualReset) Done() <-chan struct{} {
	if e == nil {
		panic(nilEvent("ManualReset.Done"))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.channelLocked()
}

// channelLocked returns the event's channel, making it (closed, if the
// event is set) for the calling waiter if there is none. It requires that
// e.mu is held.
func (e *ManualReset) channelLocked() chan struct{} {
	if e.ch == nil {
		e.ch = make(chan struct{})
		if e.set {
			close(e.ch)
		}
	}
	return e.ch
}
