package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/atomicsem/atomicsem/atomicsem"
)

// config is what a run is asked to do.
type config struct {
	duration   time.Duration
	goroutines int
	max        int64
	seed       uint64
	barging    bool
	credit     bool    // run the credit workload (credit.go) instead
	rate       float64 // the credit workload's rate, credits per second
	burst      int64   // the credit workload's burst

	out  io.Writer
	live bool // rewrite one progress line in place; otherwise print lines
	// progressEvery is the time between progress updates; zero means one
	// per 250 ms when live and one per 2 s otherwise.
	progressEvery time.Duration
}

func (c config) validate() error {
	switch {
	case c.duration <= 0:
		return errors.New("-duration must be positive")
	case c.goroutines < 1:
		return errors.New("-goroutines must be at least 1")
	case c.max < 1 || c.max > atomicsem.MaxPermits:
		return fmt.Errorf("-max must be in [1, %d]", atomicsem.MaxPermits)
	case c.credit && !(c.rate > 0 && c.rate < 1e9):
		return errors.New("-rate must be in (0, 1e9)")
	case c.credit && (c.burst < 4 || c.burst > atomicsem.MaxPermits):
		return fmt.Errorf("-burst must be in [4, %d]", atomicsem.MaxPermits)
	}
	return nil
}

func (c config) mode() string {
	if c.barging {
		return "barging"
	}
	return "fifo"
}

// stuckAfter is how long the run waits for something that a correct
// semaphore does at once (a woken waiter returning, a worker reaching a
// pause) before it reports a violation instead of hanging.
const stuckAfter = 10 * time.Second

// phase is a stretch of the run during which the controller either holds
// the limit still (steady) or moves it. Each phase is a new value, so two
// loads that return the same pointer saw the same phase throughout.
type phase struct {
	steady bool
	limit  int64 // the limit all through a steady phase
}

// epoch carries the context that workers' acquires derive from; a pause
// cancels it to bring every parked worker back.
type epoch struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newEpoch() *epoch {
	ctx, cancel := context.WithCancel(context.Background())
	return &epoch{ctx, cancel}
}

// pause is a request for every worker to release its tokens and wait.
type pause struct {
	arrived sync.WaitGroup
	resume  chan struct{}
}

// The counters here and in worker use sync/atomic's typed integers, which
// are 64-bit aligned even on 32-bit platforms.

// runner is the state shared by the workers, the controller, the monitor and
// the checks.
type runner struct {
	cfg    config
	sem    *atomicsem.Semaphore
	checks *checks
	start  time.Time

	// holders is the number of permits held by live tokens as the workers
	// count them: raised after an acquire returns, lowered before a token
	// is ended. It never exceeds the semaphore's own count of held permits.
	holders atomic.Int64
	peak    atomic.Int64 // highest value holders reached

	phase atomic.Pointer[phase]
	epoch atomic.Pointer[epoch]
	// pauseReq is non-nil while the controller wants the workers to rest.
	pauseReq atomic.Pointer[pause]
	// stopping is set just before Close; closing errors are expected from then.
	stopping atomic.Bool

	// limitMu orders the calls that move the limit: workers hold it shared
	// around Forget and TryRelease, the controller exclusively around
	// SetLimit, so the ledger below is exact and a steady phase's limit
	// cannot move.
	limitMu sync.RWMutex
	// noDebt is set while no SetLimit has left the semaphore in debt
	// (Available < 0) since Available was last seen non-negative. Only then
	// may workers forget: a Forget in debt can clamp the limit at zero, and
	// the ledger would no longer be exact.
	noDebt atomic.Bool

	// The ledger of limit changes.
	lastSet  atomic.Int64 // the value of the last SetLimit (initially the initial limit)
	sinceSet atomic.Int64 // TryRelease adds minus forgotten permits since then
	added    atomic.Int64 // all permits TryRelease added
	forgot   atomic.Int64 // all permits forgotten
	moved    atomic.Int64 // the sum over SetLimit calls of new limit − old limit

	mu      sync.Mutex
	counts  counts // guarded by mu; merged from the workers as they finish
	workers []*worker
	prober  proberStats
	fifo    fifoStats
	// Tallies kept by the controller goroutine.
	pauses, steadies, movings, setLimits int
}

// run runs the whole workload described by cfg and prints its progress and
// report to cfg.out.
func run(cfg config) *checks {
	if cfg.progressEvery == 0 {
		cfg.progressEvery = 2 * time.Second
		if cfg.live {
			cfg.progressEvery = 250 * time.Millisecond
		}
	}
	var opts []atomicsem.Option
	if cfg.barging {
		opts = append(opts, atomicsem.WithBarging())
	}
	sem, err := atomicsem.New(cfg.max, cfg.max, opts...)
	if err != nil {
		panic(err) // validate rules this out
	}
	r := &runner{cfg: cfg, sem: sem, checks: newChecks(cfg), start: time.Now()}
	r.lastSet.Store(cfg.max)
	r.noDebt.Store(true)
	r.phase.Store(&phase{})
	r.epoch.Store(newEpoch())
	fmt.Fprintf(cfg.out, "atomicsem stress: %v of a mixed workload, %d goroutines, max %d permits, %s mode, seed %d\n",
		cfg.duration, cfg.goroutines, cfg.max, cfg.mode(), cfg.seed)
	fmt.Fprintln(cfg.out, "progress: elapsed, operations per second, operations so far,"+
		" Acquire calls parked now, Acquire calls cancelled so far, limit/max and permits held now")

	var wg sync.WaitGroup
	for i := range cfg.goroutines {
		w := newWorker(r, i)
		r.workers = append(r.workers, w)
		wg.Go(w.loop)
	}
	stopAux := make(chan struct{})
	var aux sync.WaitGroup
	aux.Go(func() { r.monitor(stopAux) })
	aux.Go(func() { r.probe(stopAux, rand.New(rand.NewPCG(cfg.seed, 1<<62))) })

	r.control(rand.New(rand.NewPCG(cfg.seed, 1<<63)))
	r.closeUnderLoad(&wg)
	close(stopAux)
	aux.Wait()
	r.epoch.Load().cancel()

	r.report()
	return r.checks
}

// closeUnderLoad closes the semaphore while the workers are still busy, then
// checks that every one of them comes back and that the semaphore is at rest.
func (r *runner) closeUnderLoad(workers *sync.WaitGroup) {
	r.stopping.Store(true)
	r.sem.Close()
	c := &r.checks.closeWakes
	if !waitTimeout(workers.Wait, stuckAfter) {
		c.failf("%d workers still running %v after Close (a parked Acquire not woken?)",
			r.running(), stuckAfter)
		return
	}
	c.pass()

	r.checkQuiescent("after Close")
	cr := &r.checks.closedRefuses
	_, err := r.sem.Acquire(context.Background(), 1)
	cr.expect(errors.Is(err, atomicsem.ErrClosed), "Acquire after Close returned %v", err)
	_, ok := r.sem.TryAcquire(1)
	cr.expect(!ok, "TryAcquire succeeded after Close")
	cr.expect(!r.sem.TryRelease(1), "TryRelease succeeded after Close")
	err = r.sem.SetLimit(0)
	cr.expect(errors.Is(err, atomicsem.ErrClosed), "SetLimit after Close returned %v", err)
	cr.expect(r.sem.Stats().Closed, "Stats().Closed is false after Close")
}

// checkQuiescent checks the semaphore with no worker holding or waiting for
// anything: no permits held or waited for, and the limit exactly what the
// ledger of limit changes says.
func (r *runner) checkQuiescent(when string) {
	st := r.sem.Stats()
	r.checks.restHeld.expect(st.Held == 0 && r.holders.Load() == 0,
		"%s: Held = %d, workers' count = %d, want 0", when, st.Held, r.holders.Load())
	r.checks.restWaiters.expect(st.Waiters == 0, "%s: Waiters = %d, want 0", when, st.Waiters)
	want := r.lastSet.Load() + r.sinceSet.Load()
	r.checks.limitAsSet.expect(st.Limit == want,
		"%s: Limit = %d, want %d (last SetLimit %d, then %+d by TryRelease and Forget)",
		when, st.Limit, want, r.lastSet.Load(), r.sinceSet.Load())
	conserved := r.cfg.max + r.added.Load() - r.forgot.Load() + r.moved.Load()
	r.checks.conserved.expect(st.Limit == conserved,
		"%s: Limit = %d, but initial %d + added %d − forgotten %d + SetLimit moves %+d = %d",
		when, st.Limit, r.cfg.max, r.added.Load(), r.forgot.Load(), r.moved.Load(), conserved)
	r.checks.conserved.setDetail(fmt.Sprintf("last: %d + %d − %d + (%d) = %d",
		r.cfg.max, r.added.Load(), r.forgot.Load(), r.moved.Load(), st.Limit))
}

// running returns how many workers have not finished.
func (r *runner) running() int {
	n := 0
	for _, w := range r.workers {
		if !w.finished.Load() {
			n++
		}
	}
	return n
}

// waitTimeout calls wait and reports whether it returned within d. If it
// did not, wait keeps running in its own goroutine.
func waitTimeout(wait func(), d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// waitUntil polls cond, yielding between polls, and reports whether it
// became true within stuckAfter.
func waitUntil(cond func() bool) bool {
	deadline := time.Now().Add(stuckAfter)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
	return true
}
