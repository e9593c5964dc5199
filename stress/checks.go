package main

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// A check is one invariant that the run verifies: how many times it was
// checked, how many times it failed, and the first failure in words.
type check struct {
	what string // the invariant, as the report prints it
	na   string // if set, why the check does not apply to this run

	checked atomic.Int64
	failed  atomic.Int64
	// detail holds numbers for the report, from the latest evaluation.
	detail atomic.Pointer[string]

	mu    sync.Mutex
	first string // guarded by mu
}

// pass records that the invariant held once.
func (c *check) pass() { c.checked.Add(1) }

// passN records that the invariant held n times; workers count their checks
// locally and add them up in batches.
func (c *check) passN(n int64) { c.checked.Add(n) }

// failf records a violation.
func (c *check) failf(format string, args ...any) {
	c.checked.Add(1)
	if c.failed.Add(1) == 1 {
		c.mu.Lock()
		c.first = fmt.Sprintf(format, args...)
		c.mu.Unlock()
	}
}

// expect records whether ok held, with the failure described by format and
// args, and returns ok.
func (c *check) expect(ok bool, format string, args ...any) bool {
	if ok {
		c.pass()
	} else {
		c.failf(format, args...)
	}
	return ok
}

// setDetail stores numbers for the report beside the check's count.
func (c *check) setDetail(d string) { c.detail.Store(&d) }

func (c *check) firstFailure() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first
}

// checks are every invariant a run verifies, in the order the report lists
// them.
type checks struct {
	holdersMax    check
	holdersLimit  check
	statsSane     check
	progress      check
	acquireResult check
	restHeld      check
	restWaiters   check
	limitAsSet    check
	conserved     check
	fifoOrder     check
	cancelRestore check
	cancelWins    check
	cancelRaceHit check
	closeWakes    check
	closedRefuses check
}

func newChecks(cfg config) *checks {
	c := &checks{
		holdersMax:    check{what: "permits held by live tokens never exceed max"},
		holdersLimit:  check{what: "permits held never exceed the limit while it stays put"},
		statsSane:     check{what: "Stats is consistent (0 ≤ Held, Limit ≤ Max; Limit unchanged while it must stay put)"},
		progress:      check{what: "the workload never stalls: some operation completes in every second"},
		acquireResult: check{what: "Acquire returns a token of n, ctx.Err() unwrapped, or ErrClosed after Close"},
		restHeld:      check{what: "at rest: Held == 0"},
		restWaiters:   check{what: "at rest: Waiters == 0"},
		limitAsSet:    check{what: "at rest: Limit == the last SetLimit + permits added by TryRelease − permits forgotten since"},
		conserved:     check{what: "at rest: initial + permits added − permits forgotten + SetLimit moves == Limit"},
		fifoOrder:     check{what: "parked waiters are granted in arrival order, exactly those that fit"},
		cancelRestore: check{what: "an Acquire cancelled in a race with its grant leaves the semaphore as before"},
		cancelWins:    check{what: "an Acquire whose ctx was cancelled before the grant returns ctx.Err(), not a token"},
		cancelRaceHit: check{what: "the race of a cancellation with a grant was hit"},
		closeWakes:    check{what: "Close returns every parked Acquire (all workers finish)"},
		closedRefuses: check{what: "after Close: Acquire/SetLimit fail with ErrClosed, Try* fail, Closed set"},
	}
	if cfg.barging {
		c.cancelRaceHit.na = "barging mode wakes waiters instead of granting, except while starving"
	}
	return c
}

func (c *checks) all() []*check {
	return []*check{
		&c.holdersMax, &c.holdersLimit, &c.statsSane, &c.progress, &c.acquireResult,
		&c.restHeld, &c.restWaiters, &c.limitAsSet, &c.conserved,
		&c.fifoOrder, &c.cancelRestore, &c.cancelWins, &c.cancelRaceHit,
		&c.closeWakes, &c.closedRefuses,
	}
}

// passed reports whether no invariant was violated.
func (c *checks) passed() bool {
	for _, ch := range c.all() {
		if ch.failed.Load() > 0 {
			return false
		}
	}
	return true
}
