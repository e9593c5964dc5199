// Package group runs functions in goroutines that each hold permits of an
// atomicsem.Semaphore while they run: errgroup's shape on a weighted
// semaphore whose limit can move while the work runs.
//
// A Group starts each function only once the semaphore grants the permits it
// asks for, and releases them when the function returns. Because the limit
// lives in the semaphore, not in the group, it can be lowered or raised at any
// time with Semaphore.SetLimit: lowering it lets running functions finish and
// holds new ones back, raising it admits waiting Go calls at once. Several
// groups may share one semaphore, and so one budget.
//
// Map is the common case in one call: it applies a function to every element
// of a slice with the concurrency the semaphore allows and returns the
// results in input order. Use Map when the work is a slice known up front,
// and a Group when it is discovered as it runs or its parts differ in weight.
//
// Neither a Group nor Map recovers a panic in a function it runs: as with
// errgroup, the panic crashes the program as any goroutine's panic does,
// after the permits the function held have been released. A panicking
// function never counts as returned, so Wait and Map do not return while
// the runtime prints the panic (the crash reports it as "[recovered,
// repanicked]": the group recovers it only to release the permits, and
// panics again with the same value from the same frame).
package group

import (
	"context"
	"runtime"
	"sync"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// A Group is a collection of goroutines working on parts of one task, each
// holding permits of a semaphore while it runs.
//
// Go waits (cancellably) for the permits a function asks for and then runs it
// in a new goroutine; TryGo runs it only if the permits are free at once; Wait
// waits for every function the group started and returns the first error.
// The first error also cancels the context of a group made by WithContext,
// after which the group starts nothing more.
//
// A failed Go counts as a failure of the group: its error is recorded as if a
// function had returned it, so Wait never reports success for a task that was
// not run in full, even if the caller ignores Go's result. A refused TryGo
// records nothing.
//
// The limit belongs to the semaphore, which may be shared, and Wait waits only
// for the group's own functions, not for other holders of the semaphore. A
// Group made by New may be used again once Wait has returned; one made by
// WithContext starts nothing after Wait, which cancels its context.
//
// # Memory ordering
//
// A call to Go or TryGo that starts f synchronizes before f runs, and the
// return of f synchronizes before the return of Wait, in the sense of the Go
// memory model; the release of f's permits synchronizes before the acquire
// that obtains them, as for any token.
//
// A Group must be made by New or WithContext. The zero Group has no
// semaphore: its Wait returns nil at once, and Go and TryGo panic.
type Group struct {
	sem *atomicsem.Semaphore

	// ctx and cancel are nil in a group made by New.
	ctx    context.Context
	cancel context.CancelCauseFunc

	// wg counts the Go calls in progress and the functions running; a Go
	// joins it before it waits, so that the error a failed Go records is
	// written before Wait reads it.
	wg sync.WaitGroup

	errOnce sync.Once
	err     error // the first error; written once, under errOnce
}

// New returns a group whose functions hold permits of sem.
//
// It is a run-time error to call New with a nil semaphore; the panic's
// message begins "group: ".
func New(sem *atomicsem.Semaphore) *Group {
	if sem == nil {
		panic("group: New called with a nil Semaphore")
	}
	return &Group{sem: sem}
}

// WithContext returns a group whose functions hold permits of sem, and a
// context derived from ctx that is cancelled the first time a function of the
// group returns a non-nil error or a Go call fails (with that error as its
// cause, see context.Cause), or the first time Wait returns, whichever comes
// first. Once that context is done, Go and TryGo start nothing more.
//
// It is a run-time error to call WithContext with a nil context or a nil
// semaphore; the panic's message begins "group: ".
func WithContext(ctx context.Context, sem *atomicsem.Semaphore) (*Group, context.Context) {
	if ctx == nil {
		panic("group: WithContext called with a nil Context")
	}
	if sem == nil {
		panic("group: WithContext called with a nil Semaphore")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	return &Group{sem: sem, ctx: ctx, cancel: cancel}, ctx
}

// Go waits until the semaphore grants n permits, then calls f in a new
// goroutine that holds them until f returns. It returns nil once that
// goroutine is started; it does not wait for f. When the permits are not
// free, Go yields the processor once (as runtime.Gosched does) before it
// waits in the semaphore's queue, so that functions the group has just
// started can run first and return theirs.
//
// On failure Go does not call f, holds no permits, and returns:
//   - ctx.Err() if ctx is done before the permits are granted, even when they
//     are free;
//   - the group's context's Err() if that context (from WithContext) is done
//     before f would start: a group that has failed, whose parent context is
//     done, or whose Wait has returned starts nothing more. A Go that is
//     waiting for permits stops waiting when that context is cancelled;
//   - atomicsem.ErrClosed if the semaphore is closed;
//   - an error wrapping atomicsem.ErrExceedsMax if n is above the semaphore's
//     maximum, or atomicsem.ErrInvalidPermits if n is negative or above
//     atomicsem.MaxPermits.
//
// The failure is also recorded as the group's error if it is the first, and
// cancels the group's context, as if f had returned it.
//
// Go(ctx, 0, f) holds no permits, so the semaphore does not hold it back; Wait
// still waits for it. The first non-nil error f returns is recorded and
// cancels the group's context. The permits are released when f returns, also
// when f panics or calls runtime.Goexit; a panic is not recovered.
//
// It is a run-time error to call Go with a nil context or a nil f, or on the
// zero Group or a nil *Group; the panic's message begins "group: " and the group is unchanged.
// As with sync.WaitGroup, a Go that may be the group's first since the last
// Wait returned must happen before the next Wait.
func (g *Group) Go(ctx context.Context, n int64, f func() error) error {
	g.check("Go", f)
	if ctx == nil {
		panic("group: Go called with a nil Context")
	}
	g.wg.Add(1)
	t := newTask(g, f)
	err := g.acquire(ctx, n, &t.tok)
	if err == nil && g.ctx != nil {
		if err = g.ctx.Err(); err != nil {
			t.tok.Release()
		}
	}
	if err != nil {
		t.free()
		g.fail(err)
		g.wg.Done()
		return err
	}
	go t.run()
	return nil
}

// TryGo calls f in a new goroutine holding n permits, if the semaphore
// grants them without waiting, and reports whether it did. It follows
// Semaphore.TryAcquire: it refuses when fewer than n permits are free, when
// it would overtake a waiting acquirer, for a negative n or one above the
// maximum, and after the semaphore is closed. It also refuses once the group's
// context (from WithContext) is done. A refused TryGo changes nothing and
// records no error.
//
// Otherwise f runs as with Go: its first non-nil error is recorded and
// cancels the group's context, and its permits are released when it returns.
//
// It is a run-time error to call TryGo with a nil f, or on the zero Group or
// a nil *Group; the
// panic's message begins "group: ".
func (g *Group) TryGo(n int64, f func() error) bool {
	g.check("TryGo", f)
	if g.ctx != nil && g.ctx.Err() != nil {
		return false
	}
	t := newTask(g, f)
	var ok bool
	if t.tok, ok = g.sem.TryAcquire(n); !ok {
		t.free()
		return false
	}
	g.wg.Add(1)
	go t.run()
	return true
}

// Wait blocks until every function the group started has returned and every
// Go call in progress has finished, then returns the first error recorded
// (nil if there was none). In a group made by WithContext it then cancels the
// group's context.
//
// Wait returns nil at once on the zero Group. It is a run-time error to call
// Wait on a nil *Group; the panic's message begins "group: ".
func (g *Group) Wait() error {
	if g == nil {
		panic("group: Wait called on a nil *Group")
	}
	g.wg.Wait()
	if g.cancel != nil {
		g.cancel(g.err)
	}
	return g.err
}

// check panics for the caller bugs that Go and TryGo (named by method)
// reject before they change anything.
func (g *Group) check(method string, f func() error) {
	if g == nil {
		panic("group: " + method + " called on a nil *Group")
	}
	if g.sem == nil {
		panic("group: Group used without New or WithContext")
	}
	if f == nil {
		panic("group: nil function")
	}
}

// fail records err as the group's error if it is the first, and cancels the
// group's context with it as the cause.
func (g *Group) fail(err error) {
	g.errOnce.Do(func() {
		g.err = err
		if g.cancel != nil {
			g.cancel(err)
		}
	})
}

// acquire waits for n permits until ctx or the group's context is done and
// stores the token in tok.
//
// When the permits are not free it yields the processor once before it
// waits. The functions a loop of Go calls has just started sit in this
// processor's run queue, behind the caller, and cannot return their permits
// until the caller blocks or yields; after the yield the permits they
// returned are usually free, and the Go takes them without parking. A yield
// delays the caller only while other goroutines are runnable, that is, while
// the processor has other work, and only once per Go: then it waits in the
// semaphore's queue, whose order it joins at that moment.
func (g *Group) acquire(ctx context.Context, n int64, tok *token.Token) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var ok bool
	if *tok, ok = g.sem.TryAcquire(n); ok {
		return nil
	}
	runtime.Gosched()
	return g.wait(ctx, n, tok)
}

// wait is acquire's blocking step. In the common cases, a group without a
// context or a caller passing the group's context, it is the semaphore's
// Acquire; otherwise, when the permits are not free at once, it waits on a
// context that ends with either.
func (g *Group) wait(ctx context.Context, n int64, tok *token.Token) error {
	var err error
	if g.ctx == nil || ctx == g.ctx {
		*tok, err = g.sem.Acquire(ctx, n)
		return err
	}
	if err := g.ctx.Err(); err != nil {
		return err
	}
	var ok bool
	if *tok, ok = g.sem.TryAcquire(n); ok {
		return nil
	}
	both, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(g.ctx, cancel)
	defer stop()
	if *tok, err = g.sem.Acquire(both, n); err != nil {
		// Say which of the two contexts ended the wait; if both are done,
		// the caller's own comes first.
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if gerr := g.ctx.Err(); gerr != nil {
			return gerr
		}
	}
	return err
}
