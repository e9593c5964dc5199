// Package event provides auto-reset and manual-reset events built on channels.
//
// An event is a flag that goroutines wait on. Setting an AutoReset event
// releases exactly one waiter (or, when nobody waits, the next one to arrive)
// and clears itself; setting a ManualReset event releases every waiter, present
// and future, until it is Reset. Both are ready to use from their zero value,
// both cancel through a context.Context, and both expose their channel so that
// they compose with select.
//
// It is a run-time error to call a method on a nil *AutoReset or
// *ManualReset, or to pass Wait a nil context.Context; the panic's message
// begins "event: " and names the method.
//
// The semaphore in package atomicsem parks each waiter on its own AutoReset,
// so a release wakes one goroutine rather than a herd.
package event

import "context"

// nilEvent and nilContext are what a method called on a nil event, or with
// a nil context.Context, panics with: the method's name. The message is
// built only when it is printed.
type (
	nilEvent   string
	nilContext string
)

func (m nilEvent) Error() string   { return "event: " + string(m) + " called on a nil event" }
func (m nilContext) Error() string { return "event: " + string(m) + " called with a nil Context" }

// noCopy makes go vet's copylocks check report copies of an event: a copy
// taken after first use shares the channel with the original, which no caller
// means.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// waitOn receives from ch and returns nil, or returns ctx.Err() if ctx is
// done first. A ctx that is already done fails at once even if ch is ready,
// so it is checked on its own first: a select with both cases ready would
// pick one at random.
func waitOn(ctx context.Context, ch <-chan struct{}) error {
	done := ctx.Done()
	select {
	case <-done:
		return ctx.Err()
	default:
	}
	select {
	case <-ch:
		return nil
	case <-done:
		return ctx.Err()
	}
}
