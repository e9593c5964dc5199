package main

import (
	"fmt"
	"io"
	"time"
)

// report settles the checks that are decided only at the end and prints
// what the run did and every invariant's result.
func (r *runner) report() {
	elapsed := time.Since(r.start)
	p := r.prober
	if p.raced > 0 {
		r.checks.cancelRaceHit.pass()
	} else if r.checks.cancelRaceHit.na == "" {
		r.checks.cancelRaceHit.failf("no probe saw a grant passed on by a cancelled waiter in %d probes", p.probes)
	}
	r.checks.holdersMax.setDetail(fmt.Sprintf("peak %d of %d", r.peak.Load(), r.cfg.max))
	r.checks.holdersLimit.setDetail(fmt.Sprintf("%d steady phases", r.steadies))
	r.checks.fifoOrder.setDetail(fmt.Sprintf("%d rounds, %d waiters", r.fifo.rounds, r.fifo.waiters))
	r.checks.cancelRaceHit.setDetail(fmt.Sprintf("%d of %d probes", p.raced, p.probes))

	r.mu.Lock()
	c := r.counts
	r.mu.Unlock()
	ops := r.ops()
	out := r.cfg.out
	fmt.Fprintf(out, "\nran %v: %d ops, %.0f ops/s (seed %d, mode %s)\n",
		elapsed.Round(time.Millisecond), ops, float64(ops)/elapsed.Seconds(), r.cfg.seed, r.cfg.mode())
	fmt.Fprintf(out, "  Acquire     %d granted, %d cancelled, %d past deadline, %d interrupted by pauses, %d closed\n",
		c.acquireOK, c.acquireCancelled, c.acquireDeadline, c.acquirePaused, c.acquireClosed)
	fmt.Fprintf(out, "  TryAcquire  %d granted, %d refused\n", c.tryOK, c.tryFail)
	fmt.Fprintf(out, "  tokens      %d released, %d forgotten (%d more released instead: limit steady or in debt)\n",
		c.released, c.forgotten, c.forgetAsRelease)
	fmt.Fprintf(out, "  TryRelease  %d added, %d refused\n", c.tryReleaseOK, c.tryReleaseFail)
	fmt.Fprintf(out, "  limit       %d SetLimit calls in %d steady and %d moving phases, %d pauses at rest\n",
		r.setLimits, r.steadies, r.movings, r.pauses)
	fmt.Fprintf(out, "  FIFO        %d rounds, %d waiters, %d release steps checked\n",
		r.fifo.rounds, r.fifo.waiters, r.fifo.steps)
	fmt.Fprintf(out, "  probe       %d cancel-vs-grant probes: %d granted, %d cancelled before a grant, %d cancelled after a grant (passed on)\n",
		p.probes, p.grantWon, p.cancelWon, p.raced)
	printInvariants(out, r.checks.all(), r.cfg.seed)
}

// printInvariants prints every check's result and numbers, and the verdict
// line; a check never evaluated, unless it does not apply, counts as
// failed.
func printInvariants(out io.Writer, all []*check, seed uint64) {
	fmt.Fprintln(out, "invariants:")
	failed := 0
	for _, ch := range all {
		result := "PASS"
		switch {
		case ch.failed.Load() > 0:
			result = "FAIL"
			failed++
		case ch.checked.Load() == 0 && ch.na != "":
			result = "n/a "
		case ch.checked.Load() == 0:
			result = "FAIL"
			failed++
			ch.failf("never checked")
		}
		fmt.Fprintf(out, "  %s  %s\n", result, ch.what)
		numbers := fmt.Sprintf("%d checks", ch.checked.Load())
		if ch.failed.Load() > 0 {
			numbers += fmt.Sprintf(", %d violations", ch.failed.Load())
		}
		if d := ch.detail.Load(); d != nil {
			numbers += "; " + *d
		}
		if result == "n/a " {
			numbers = ch.na
		}
		fmt.Fprintf(out, "        %s\n", numbers)
		if f := ch.firstFailure(); f != "" {
			fmt.Fprintf(out, "        first violation: %s\n", f)
		}
	}
	if failed > 0 {
		fmt.Fprintf(out, "FAIL: %d of %d invariants violated (seed %d)\n", failed, len(all), seed)
		return
	}
	fmt.Fprintf(out, "PASS: all %d invariants held\n", len(all))
}
