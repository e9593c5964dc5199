package group

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// Map calls f on every element of in, each call holding one permit of sem
// while it runs, and returns the results in the order of in. The calls run
// in goroutines, as many at a time as the semaphore's limit admits, and
// follow the limit as it moves: lowering it lets running calls finish and
// holds new ones back, raising it starts waiting ones at once.
//
// The context passed to f is derived from ctx. On the first error, from f or
// from waiting for a permit, that context is cancelled with the error as its
// cause, no further call starts, and Map returns nil and the error once the
// calls already running have returned. If ctx is done before every element
// has been started, Map returns nil and ctx.Err(). Waiting for a permit fails
// as Semaphore.Acquire(ctx, 1) does: with atomicsem.ErrClosed if sem is
// closed, and with an error wrapping atomicsem.ErrExceedsMax if sem's maximum
// is 0. The context passed to f is cancelled when Map returns.
//
// An empty in returns an empty, non-nil slice and no error at once, without
// calling f or touching sem. Otherwise the result slice is allocated once.
// Map starts no goroutine ahead of a permit: its caller waits for a permit
// before it starts each goroutine, and a goroutine whose call has returned
// goes on to the next element while a permit is free, and ends otherwise. So
// every goroutine Map starts holds a permit, apart from ones ending, and
// their number follows the limit, not the length of in.
//
// A panic in f is not recovered: it crashes the program as a panic in any
// goroutine does, after the call's permit has been released, and Map does
// not return meanwhile.
//
// Memory ordering: the call of Map synchronizes before every call of f, and
// the return of every call of f synchronizes before Map returns, in the
// sense of the Go memory model.
//
// It is a run-time error to call Map with a nil context, a nil semaphore, or
// (for a non-empty in) a nil f; the panic's message begins "group: ".
func Map[T, R any](ctx context.Context, sem *atomicsem.Semaphore, in []T, f func(context.Context, T) (R, error)) ([]R, error) {
	switch {
	case ctx == nil:
		panic("group: Map called with a nil Context")
	case sem == nil:
		panic("group: Map called with a nil Semaphore")
	case len(in) == 0:
		return []R{}, nil
	case f == nil:
		panic("group: nil function")
	}
	m := &mapper[T, R]{sem: sem, in: in, out: make([]R, len(in)), f: f}
	m.ctx, m.cancel = context.WithCancelCause(ctx)
	m.waitCtx, m.stopWaiting = context.WithCancel(m.ctx)
	m.startAll()
	m.wg.Wait()
	m.stopWaiting()
	m.cancel(nil)
	if m.err != nil {
		return nil, m.err
	}
	return m.out, nil
}

// A mapper is one call of Map: the input, the results, and the goroutines
// (workers) that call f.
//
// # Starting calls
//
// Map's caller waits for a permit, claims the next element and starts a
// worker with both, over and over, as a loop of Group.Go does; so the next
// element waits for its turn in the semaphore's queue, and a raised limit
// starts it at once. A worker whose call returns releases its permit and
// takes one again with TryAcquire, which succeeds only while a permit is
// free and nobody waits in the queue; then it claims the next element
// itself, saving the start of a goroutine, and otherwise it ends.
//
// Elements are claimed through one atomic counter, so each is called once,
// and only by a goroutine that holds a permit, so they start in input order
// when the limit is 1. The claim of the last element ends the caller's wait
// (through waitCtx): a caller still waiting then has nothing left to start,
// and must not go on waiting, for a limit lowered to 0, say.
type mapper[T, R any] struct {
	sem *atomicsem.Semaphore
	in  []T
	out []R
	f   func(context.Context, T) (R, error)

	ctx    context.Context // cancelled on the first error and when Map returns
	cancel context.CancelCauseFunc

	// waitCtx is the caller's context for waiting for permits: ctx, also
	// cancelled once every element has been claimed.
	waitCtx     context.Context
	stopWaiting context.CancelFunc

	next atomic.Int64 // the index of the next element to claim
	wg   sync.WaitGroup

	// idle is a stack of the records of ended workers, for the caller to
	// start again: workers push, and only the caller pops, which is what
	// makes a stack of compare-and-swaps safe from ABA here (a record
	// cannot leave the stack and come back while the caller looks at it).
	idle atomic.Pointer[mapWorker[T, R]]

	errOnce sync.Once
	err     error // the first error; written once, under errOnce
}

// A mapWorker is one goroutine that calls f, with the permit it holds.
// Records are reused once their goroutine has ended.
type mapWorker[T, R any] struct {
	m    *mapper[T, R]
	i    int64       // the element the worker starts with
	tok  token.Token // the permit for the element being called
	run  func()      // w.loop, built once so that go w.run() allocates nothing
	next *mapWorker[T, R]
}

// claim returns the index of the next element to call and reports whether
// there is one left and the mapper has not failed. A claim made after the
// context is done records that as the error.
func (m *mapper[T, R]) claim() (int64, bool) {
	i := m.next.Add(1) - 1
	if i >= int64(len(m.in))-1 {
		m.stopWaiting()
	}
	if i >= int64(len(m.in)) {
		return 0, false
	}
	if err := m.ctx.Err(); err != nil {
		m.fail(err)
		return 0, false
	}
	return i, true
}

// startAll is the caller's loop: it waits for a permit, claims an element
// and starts a worker for it, until every element is claimed or the mapper
// fails.
func (m *mapper[T, R]) startAll() {
	for m.next.Load() < int64(len(m.in)) {
		w := m.worker()
		if err := m.acquire(&w.tok); err != nil {
			m.push(w)
			if m.ctx.Err() == nil && m.waitCtx.Err() != nil {
				return // every element was claimed while the caller waited
			}
			m.fail(err)
			return
		}
		i, ok := m.claim()
		if !ok {
			w.tok.Release()
			m.push(w)
			return
		}
		w.i = i
		m.wg.Add(1)
		go w.run()
	}
}

// acquire waits for a permit for the caller's next worker, until waitCtx is
// done. Like Group.acquire, it yields the processor once before it waits, so
// that the workers it has started, runnable behind it, can return their
// permits (or go on with further elements) first.
func (m *mapper[T, R]) acquire(tok *token.Token) error {
	var ok bool
	if *tok, ok = m.sem.TryAcquire(1); ok {
		return nil
	}
	runtime.Gosched()
	var err error
	*tok, err = m.sem.Acquire(m.waitCtx, 1)
	return err
}

// loop calls f on the worker's element and then on further ones while it
// can take a permit without waiting.
//
// A panicking f gives its permit back but does not end the worker, so Map
// cannot return while the runtime prints the panic (see task.exec).
func (w *mapWorker[T, R]) loop() {
	m := w.m
	returned := false
	defer func() {
		if !returned {
			if r := recover(); r != nil {
				if w.tok.Permits() != 0 {
					w.tok.Release()
				}
				panic(r)
			}
		}
		w.end()
	}()
	i := w.i
	for {
		r, err := m.f(m.ctx, m.in[i])
		returned = true
		if err != nil {
			m.fail(err)
			return
		}
		m.out[i] = r
		w.tok.Release()
		if m.next.Load() >= int64(len(m.in)) {
			return
		}
		var ok bool
		if w.tok, ok = m.sem.TryAcquire(1); !ok {
			return
		}
		if i, ok = m.claim(); !ok {
			return
		}
		returned = false
	}
}

// end releases the worker's permit, if it holds one, and puts its record
// back for reuse. It runs deferred, when f returns or exits its goroutine.
func (w *mapWorker[T, R]) end() {
	if w.tok.Permits() != 0 {
		w.tok.Release()
	}
	m := w.m
	m.push(w) // w may be started again from here on
	m.wg.Done()
}

// worker returns a record for a new worker: an ended one if there is one.
// Only the caller's loop calls it.
func (m *mapper[T, R]) worker() *mapWorker[T, R] {
	for {
		w := m.idle.Load()
		if w == nil {
			w = &mapWorker[T, R]{m: m}
			w.run = w.loop
			return w
		}
		if m.idle.CompareAndSwap(w, w.next) {
			w.next = nil
			return w
		}
	}
}

// push puts an ended worker's record on the idle stack.
func (m *mapper[T, R]) push(w *mapWorker[T, R]) {
	for {
		top := m.idle.Load()
		w.next = top
		if m.idle.CompareAndSwap(top, w) {
			return
		}
	}
}

// fail records err as the mapper's error if it is the first, and cancels
// the context passed to f with it as the cause.
func (m *mapper[T, R]) fail(err error) {
	m.errOnce.Do(func() {
		m.err = err
		m.cancel(err)
	})
}
