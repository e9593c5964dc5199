package main

import (
	"fmt"
	"io"
	"time"
)

// report decides the checks that can only be decided at the end and prints
// what the run did and every invariant's result.
func (r *runner) report() {
	elapsed := time.Since(r.start)
	p := r.prober
	if p.raced > 0 {
		r.checks.cancelRaceHit.pass()
	} else if r.checks.cancelRaceHit.na == "" {
		r.checks.cancelRaceHit.failf("no probe saw a cancelled waiter give back a permit granted to it, in %d probes", p.probes)
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
	fmt.Fprintf(out, "\nran %v: %d operations, %.0f a second (seed %d, %s mode)\n",
		elapsed.Round(time.Millisecond), ops, float64(ops)/elapsed.Seconds(), r.cfg.seed, r.cfg.mode())
	fmt.Fprintln(out, "calls, by outcome:")
	fmt.Fprintf(out, "  Acquire     %d granted, %d cancelled, %d past their deadline, %d stopped for a pause, %d failed by Close\n",
		c.acquireOK, c.acquireCancelled, c.acquireDeadline, c.acquirePaused, c.acquireClosed)
	fmt.Fprintf(out, "  TryAcquire  %d granted, %d refused\n", c.tryOK, c.tryFail)
	fmt.Fprintf(out, "  Release     %d (%d of them in place of a Forget, while the limit had to stay put or was below what tokens held)\n",
		c.released+c.forgetAsRelease, c.forgetAsRelease)
	fmt.Fprintf(out, "  Forget      %d\n", c.forgotten)
	fmt.Fprintf(out, "  TryRelease  %d added permits, %d refused\n", c.tryReleaseOK, c.tryReleaseFail)
	fmt.Fprintf(out, "  SetLimit    %d, in %d phases of a steady limit and %d of a moving one\n",
		r.setLimits, r.steadies, r.movings)
	fmt.Fprintf(out, "  pauses      %d, to check the semaphore at rest\n", r.pauses)
	fmt.Fprintf(out, "  FIFO check  %d rounds of %d parked waiters in all, %d releases checked\n",
		r.fifo.rounds, r.fifo.waiters, r.fifo.steps)
	fmt.Fprintf(out, "  probes      %d cancellations raced against a grant: the waiter got the permit in %d,"+
		" was cancelled before any grant in %d, and was cancelled with the permit already granted in %d"+
		" (the permit went back)\n",
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
