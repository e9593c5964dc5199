package group_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
)

// errBoom is the error the tests' functions fail with.
var errBoom = errors.New("group_test: boom")

// newSem returns a semaphore with limit permits and a ceiling of max, and
// fails the test if New refuses them.
func newSem(t testing.TB, limit, max int64) *atomicsem.Semaphore {
	t.Helper()
	sem, err := atomicsem.New(limit, max)
	require.NoError(t, err)
	return sem
}

// requireIdle fails the test unless sem holds no permits and has no waiter.
func requireIdle(t testing.TB, sem *atomicsem.Semaphore) {
	t.Helper()
	st := sem.Stats()
	require.Zero(t, st.Held, "permits still held: %+v", st)
	require.Zero(t, st.Waiters, "acquirers still waiting: %+v", st)
}

// panicMessage calls f and returns the message of the panic it raised, or
// fails the test if it did not panic.
func panicMessage(t testing.TB, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		require.NotNil(t, r, "no panic")
		msg = fmt.Sprint(r)
	}()
	f()
	return ""
}

// requireGroupPanic fails the test unless f panics with a message that
// begins "group: ".
func requireGroupPanic(t testing.TB, f func()) {
	t.Helper()
	msg := panicMessage(t, f)
	require.True(t, strings.HasPrefix(msg, "group: "), "panic %q lacks the package prefix", msg)
}

// A gauge counts the calls (or permits) in flight and remembers the most it
// has seen at once.
type gauge struct {
	now, max atomic.Int64
}

// add moves the count by d and returns the new count.
func (g *gauge) add(d int64) int64 {
	n := g.now.Add(d)
	for {
		m := g.max.Load()
		if n <= m || g.max.CompareAndSwap(m, n) {
			return n
		}
	}
}

// A limitLog is the history of the limits a test has set on a semaphore, so
// that a function can check what it sees against every limit that was in
// force since its Go call began.
//
// The argument: a function counts itself in after its permits were granted
// and out before they are released, so the count never exceeds the permits
// held. The permits held only grow at a grant, and every grant leaves them at
// most the limit in force at that moment. So at any moment the count is at
// most the limit at the latest grant, which came no earlier than the grant of
// the function that is looking, and so no earlier than its Go call began.
type limitLog struct {
	mu     sync.RWMutex
	sem    *atomicsem.Semaphore
	limits []int64 // every limit set, in order; the last is in force
}

// newLimitLog returns a log of sem's limits, starting with the current one.
func newLimitLog(sem *atomicsem.Semaphore) *limitLog {
	return &limitLog{sem: sem, limits: []int64{sem.Stats().Limit}}
}

// set moves the limit and records it, in one step as far as mark and
// maxSince can see.
func (l *limitLog) set(t testing.TB, limit int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	require.NoError(t, l.sem.SetLimit(limit))
	l.limits = append(l.limits, limit)
}

// mark returns the position of the limit in force now.
func (l *limitLog) mark() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.limits) - 1
}

// maxSince returns the largest limit in force from position from to now.
func (l *limitLog) maxSince(from int) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var most int64
	for _, limit := range l.limits[from:] {
		most = max(most, limit)
	}
	return most
}

// background is context.Background, short for the many calls that need no
// cancellation.
var background = context.Background()

// yield gives other goroutines a chance to run, as errgroup's tests do by
// sleeping a microsecond, without a clock.
func yield() {
	for range 4 {
		runtime.Gosched()
	}
}
