package main

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// control moves the limit in steady and moving phases, in random order
// with moving phases never ahead, until the run's duration is up, and
// pauses the workload a few times on the way to check the semaphore at
// rest.
func (r *runner) control(rng *rand.Rand) {
	end := r.start.Add(r.cfg.duration)
	// One pause per five seconds, and at least one, evenly spread.
	pauses := max(1, int(r.cfg.duration/(5*time.Second)))
	every := r.cfg.duration / time.Duration(pauses+1)
	nextPause := r.start.Add(every)
	for now := time.Now(); now.Before(end); now = time.Now() {
		if r.pauses < pauses && !now.Before(nextPause) {
			r.pauseAndCheck(rng)
			nextPause = nextPause.Add(every)
			continue
		}
		phaseEnd := now.Add(time.Duration(50+rng.IntN(250)) * time.Millisecond)
		if phaseEnd.After(end) {
			phaseEnd = end
		}
		if r.pauses < pauses && phaseEnd.After(nextPause) {
			phaseEnd = nextPause
		}
		// A coin decides, but moving phases never outnumber steady ones
		// (the first is steady): a short run on a loaded machine must
		// still hold the limit still often enough for the steady-limit
		// check to run.
		if rng.IntN(2) == 0 || r.movings >= r.steadies {
			r.steadyPhase(rng, phaseEnd)
		} else {
			r.movingPhase(rng, phaseEnd)
		}
	}
	r.limitMu.Lock()
	r.phase.Store(&phase{})
	r.limitMu.Unlock()
}

// pickLimit chooses a new limit: often zero (throttled) or the maximum
// (unthrottled), otherwise anything between.
func (r *runner) pickLimit(rng *rand.Rand) int64 {
	switch x := rng.IntN(10); {
	case x < 2:
		return 0
	case x < 5:
		return r.cfg.max
	default:
		return 1 + rng.Int64N(r.cfg.max)
	}
}

// steadyPhase sets a limit and holds it still until end: no SetLimit, and
// workers neither forget nor add permits.
func (r *runner) steadyPhase(rng *rand.Rand, end time.Time) {
	limit := r.pickLimit(rng)
	r.limitMu.Lock()
	// Leave the previous phase first: if it was steady too, its limit
	// must not be checked against the one about to be set.
	r.phase.Store(&phase{})
	r.setLimitLocked(limit)
	r.phase.Store(&phase{steady: true, limit: limit})
	r.limitMu.Unlock()
	r.steadies++
	r.idleUntil(end)
}

// movingPhase moves the limit every few milliseconds until end, while
// workers forget and add permits.
func (r *runner) movingPhase(rng *rand.Rand, end time.Time) {
	r.limitMu.Lock()
	r.phase.Store(&phase{})
	r.limitMu.Unlock()
	r.movings++
	for time.Now().Before(end) {
		r.idleUntil(time.Now().Add(time.Duration(1+rng.IntN(20)) * time.Millisecond))
		r.limitMu.Lock()
		r.setLimitLocked(r.pickLimit(rng))
		r.limitMu.Unlock()
	}
}

// setLimitLocked calls SetLimit and keeps the ledger. It requires that
// r.limitMu is held exclusively, so that no other call moves the limit
// between the reads around SetLimit.
func (r *runner) setLimitLocked(limit int64) {
	before := r.sem.Stats().Limit
	if err := r.sem.SetLimit(limit); err != nil {
		r.checks.limitAsSet.failf("SetLimit(%d) with max %d: %v", limit, r.cfg.max, err)
		return
	}
	r.moved.Add(limit - before)
	r.lastSet.Store(limit)
	r.sinceSet.Store(0)
	r.setLimits++
	if r.sem.Stats().Available < 0 {
		r.noDebt.Store(false)
	}
}

// idleUntil waits until t, watching for the semaphore to come out of debt.
func (r *runner) idleUntil(t time.Time) {
	for {
		// Debt only ever comes from SetLimit, which only this goroutine
		// calls: once Available is seen non-negative it stays so until the
		// next SetLimit.
		if !r.noDebt.Load() && r.sem.Stats().Available >= 0 {
			r.noDebt.Store(true)
		}
		d := time.Until(t)
		if d <= 0 {
			return
		}
		time.Sleep(min(d, time.Millisecond))
	}
}

// pauseAndCheck brings every worker to rest, with its tokens released and
// its parked acquires cancelled, checks the semaphore at rest, runs a FIFO
// round on it, and lets the workers go on.
func (r *runner) pauseAndCheck(rng *rand.Rand) {
	r.limitMu.Lock()
	r.phase.Store(&phase{})
	r.limitMu.Unlock()

	p := &pause{resume: make(chan struct{})}
	p.arrived.Add(len(r.workers))
	r.pauseReq.Store(p)
	r.epoch.Load().cancel()
	r.pauses++
	if !waitTimeout(p.arrived.Wait, stuckAfter) {
		r.checks.restWaiters.failf("pause %d: workers not at rest after %v (a cancelled Acquire that does not return?); %+v",
			r.pauses, stuckAfter, r.sem.Stats())
	} else {
		r.checkQuiescent(fmt.Sprintf("pause %d", r.pauses))
		r.fifoRound(rng)
		r.checkQuiescent(fmt.Sprintf("pause %d, after the FIFO round", r.pauses))
	}

	r.limitMu.Lock()
	r.setLimitLocked(r.pickLimit(rng))
	r.limitMu.Unlock()
	r.epoch.Store(newEpoch())
	r.pauseReq.Store(nil)
	close(p.resume)
}
