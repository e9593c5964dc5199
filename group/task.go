package group

import (
	"sync"

	"github.com/atomicsem/atomicsem/token"
)

// A task is one function a Group runs, with the permits it holds. Tasks are
// recycled through a pool, and each carries its own run closure, built once
// when the task is made: a go statement that calls a func value with no
// arguments passes that value to the new goroutine as it is, so starting a
// recycled task allocates nothing, where a closure over the function and its
// token would be allocated (with the token beside it) on every Go.
type task struct {
	g   *Group
	f   func() error
	tok token.Token // the permits f holds; set by the caller of newTask
	run func()      // t.exec
}

// tasks holds the tasks not in use. It has no New function (a task's run
// closure refers back to the pool through end): newTask makes one when the
// pool is empty.
var tasks sync.Pool

// newTask returns a task for f in g, holding no permits yet.
func newTask(g *Group, f func() error) *task {
	t, _ := tasks.Get().(*task)
	if t == nil {
		t = new(task)
		t.run = t.exec
	}
	t.g, t.f = g, f
	return t
}

// free drops the task's references and returns it to the pool. It requires
// that the token has been ended or was never filled.
func (t *task) free() {
	t.g, t.f = nil, nil
	tasks.Put(t)
}

// exec calls f, records its error, and ends the task.
//
// A panicking f gives its permits back, but does not end the task: the
// deferred call recovers the panic only to tell it from runtime.Goexit,
// releases the token and panics again with the same value, from the frame
// where f panicked, so the crash shows f's stack. The wait group is never
// left, so Wait (and whatever waits on it) cannot return while the runtime
// prints the panic and stops the program. A Goexit (t.FailNow in a test)
// ends the task as a return does.
func (t *task) exec() {
	returned := false
	defer func() {
		if !returned {
			if r := recover(); r != nil {
				t.tok.Release()
				panic(r)
			}
		}
		t.end()
	}()
	err := t.f()
	returned = true
	if err != nil {
		t.g.fail(err)
	}
}

// end releases the task's permits and then leaves the group's wait group,
// so that the permits are back before Wait returns. It runs deferred, when
// f returns or exits its goroutine.
func (t *task) end() {
	g := t.g
	t.tok.Release()
	t.free()
	g.wg.Done()
}
