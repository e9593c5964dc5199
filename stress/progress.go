package main

import (
	"fmt"
	"time"
)

const (
	sampleEvery = time.Millisecond // how often the monitor checks a Stats snapshot
	stallAfter  = time.Second      // how long without progress is a stall
)

// monitor samples the semaphore's Stats until stop is closed, checking each
// snapshot, and shows progress.
func (r *runner) monitor(stop <-chan struct{}) {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	last, lastOps := time.Now(), int64(0)
	moved, movedOps := time.Now(), int64(0)
	for {
		select {
		case <-stop:
			if r.cfg.live {
				fmt.Fprintln(r.cfg.out)
			}
			return
		case <-tick.C:
		}
		st := r.sample()
		// A second without one completed operation, outside a pause, is a
		// stall: every worker waits without a deadline for something that
		// does not come (deadlines are at most a few milliseconds).
		if ops, now := r.ops(), time.Now(); ops != movedOps || r.pauseReq.Load() != nil {
			moved, movedOps = now, ops
			r.checks.progress.pass()
		} else if now.Sub(moved) >= stallAfter {
			r.checks.progress.failf("no operation completed for %v at %.1fs, Stats %+v",
				stallAfter, now.Sub(r.start).Seconds(), r.sem.Stats())
			moved = now
		}
		if now := time.Now(); now.Sub(last) >= r.cfg.progressEvery {
			ops := r.ops()
			rate := float64(ops-lastOps) / now.Sub(last).Seconds()
			last, lastOps = now, ops
			line := fmt.Sprintf("%6.1fs  %9.0f ops/s  %11d ops  parked %4d  cancelled %9d  limit %4d/%d  held %4d",
				now.Sub(r.start).Seconds(), rate, ops, st.Waiters, r.cancelled(), st.Limit, st.Max, st.Held)
			if r.cfg.live {
				fmt.Fprintf(r.cfg.out, "\r%s\x1b[K", line) // \x1b[K clears what a longer line left
			} else {
				fmt.Fprintln(r.cfg.out, line)
			}
		}
	}
}

// statsView is the part of a Stats snapshot that progress shows.
type statsView struct {
	Waiters          int
	Limit, Max, Held int64
}

// sample checks one Stats snapshot and returns it.
func (r *runner) sample() statsView {
	ph := r.phase.Load()
	st := r.sem.Stats()
	steady := ph.steady && r.phase.Load() == ph
	c := &r.checks.statsSane
	switch {
	case st.Max != r.cfg.max:
		c.failf("Stats %+v: Max changed from %d", st, r.cfg.max)
	case st.Held < 0 || st.Held > st.Max:
		c.failf("Stats %+v: Held outside [0, Max]", st)
	case st.Limit < 0 || st.Limit > st.Max:
		c.failf("Stats %+v: Limit outside [0, Max]", st)
	case st.Available != st.Limit-st.Held:
		c.failf("Stats %+v: Available != Limit − Held", st)
	case st.Waiters < 0:
		c.failf("Stats %+v: negative Waiters", st)
	case st.Closed && !r.stopping.Load():
		c.failf("Stats %+v: closed before Close", st)
	case steady && st.Limit != ph.limit:
		c.failf("Stats %+v: Limit moved during a steady phase at %d", st, ph.limit)
	default:
		c.pass()
	}
	return statsView{Waiters: st.Waiters, Limit: st.Limit, Max: st.Max, Held: st.Held}
}

func (r *runner) ops() int64 {
	var n int64
	for _, w := range r.workers {
		n += w.ops.Load()
	}
	return n
}

func (r *runner) cancelled() int64 {
	var n int64
	for _, w := range r.workers {
		n += w.cancelled.Load()
	}
	return n
}
