package main

import (
	"context"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

const probeEvery = time.Millisecond

// proberStats count the probes' outcomes.
type proberStats struct {
	probes    int64
	grantWon  int64 // the waiter got the permit
	cancelWon int64 // the waiter returned ctx.Err(), no grant seen
	raced     int64 // the waiter returned ctx.Err() after the permit was granted to it
}

// probe races cancellations against grants until stop is closed.
//
// Whether a cancelled waiter had been granted its permits before it
// withdrew cannot be seen in the main workload: from outside, a grant that
// the waiter passes on looks like no grant at all. So the prober uses a
// semaphore of its own, with one permit and one waiter: it parks the waiter,
// cancels its context and adds the permit (or the other way round), and
// watches Stats until the waiter returns. Nobody else holds permits there,
// so Held == 1 seen while the waiter is still inside Acquire means the
// permit was granted to it; if the waiter then returns ctx.Err(), the grant
// raced the cancellation and was passed on. That count is a lower bound:
// Stats may miss the grant's short life.
func (r *runner) probe(stop <-chan struct{}, rng *rand.Rand) {
	var opts []atomicsem.Option
	if r.cfg.barging {
		opts = append(opts, atomicsem.WithBarging())
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		// One probe per millisecond or so: enough races to count, without
		// taking the processors from the workload.
		time.Sleep(probeEvery)
		s, err := atomicsem.New(0, 1, opts...)
		if err != nil {
			panic(err)
		}
		r.probeOnce(s, rng.IntN(4) != 0)
	}
}

func (r *runner) probeOnce(s *atomicsem.Semaphore, cancelFirst bool) {
	c := &r.checks.cancelRestore
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var tok token.Token
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		tok, err = s.Acquire(ctx, 1)
	}()
	if !waitUntil(func() bool { return s.Stats().Waiters == 1 }) {
		c.failf("probe: the waiter did not queue, %+v", s.Stats())
		return
	}
	if cancelFirst {
		cancel()
		s.TryRelease(1)
	} else {
		s.TryRelease(1)
		cancel()
	}
	granted := false
	for spin := 0; ; spin++ {
		select {
		case <-done:
		default:
			if s.Stats().Held == 1 {
				granted = true
			}
			if spin%16 == 15 {
				runtime.Gosched()
			}
			continue
		}
		break
	}
	r.prober.probes++
	st := s.Stats()
	switch {
	case err == nil:
		r.prober.grantWon++
		r.checks.cancelWins.expect(!cancelFirst,
			"probe: the waiter returned a token although its ctx was cancelled before the permit was added")
		c.expect(tok.Permits() == 1 && st == atomicsem.Stats{Available: 0, Held: 1, Limit: 1, Max: 1},
			"probe: granted waiter holds %d, semaphore %+v", tok.Permits(), st)
		tok.Release()
	case err == context.Canceled:
		r.checks.cancelWins.pass()
		if granted {
			r.prober.raced++
		} else {
			r.prober.cancelWon++
		}
		c.expect(st == atomicsem.Stats{Available: 1, Held: 0, Limit: 1, Max: 1},
			"probe: cancelled waiter (granted first: %t) left the semaphore at %+v, want the permit available",
			granted, st)
	default:
		c.failf("probe: Acquire returned %v", err)
	}
}
