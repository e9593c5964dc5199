package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// maxTokens is how many tokens a worker holds at most; holding a few at once
// makes the permits held a mix of weights and ages.
const maxTokens = 3

// counts are a worker's tallies of what its calls did.
type counts struct {
	acquireOK, acquireCancelled, acquireDeadline, acquirePaused, acquireClosed int64
	tryOK, tryFail                                                             int64
	released, forgotten, forgetAsRelease                                       int64
	tryReleaseOK, tryReleaseFail                                               int64
}

func (c *counts) add(o *counts) {
	c.acquireOK += o.acquireOK
	c.acquireCancelled += o.acquireCancelled
	c.acquireDeadline += o.acquireDeadline
	c.acquirePaused += o.acquirePaused
	c.acquireClosed += o.acquireClosed
	c.tryOK += o.tryOK
	c.tryFail += o.tryFail
	c.released += o.released
	c.forgotten += o.forgotten
	c.forgetAsRelease += o.forgetAsRelease
	c.tryReleaseOK += o.tryReleaseOK
	c.tryReleaseFail += o.tryReleaseFail
}

// worker is one goroutine of the mixed workload.
type worker struct {
	r    *runner
	rng  *rand.Rand
	toks []*token.Token
	c    counts
	// Local tallies of passed checks, added to the shared checks when the
	// worker finishes, so that checking adds no shared counter to the hot
	// path beyond holders itself.
	maxChecks, limitChecks, resultChecks int64

	// ops and cancelled are read live by the monitor; each worker counts
	// its own, so that the hot path shares no counter.
	ops       atomic.Int64
	cancelled atomic.Int64
	finished  atomic.Bool
}

func newWorker(r *runner, id int) *worker {
	return &worker{r: r, rng: rand.New(rand.NewPCG(r.cfg.seed, uint64(id)))}
}

// loop runs operations until the run stops, resting whenever the controller
// asks for a pause.
func (w *worker) loop() {
	defer w.finish()
	for !w.r.stopping.Load() {
		if p := w.r.pauseReq.Load(); p != nil {
			w.releaseAll()
			p.arrived.Done()
			<-p.resume
			continue
		}
		w.step()
		w.ops.Add(1)
	}
}

// step runs one randomly chosen operation. A worker that holds tokens mostly
// ends them, and waits for more only with a deadline; one that holds none
// mostly acquires.
func (w *worker) step() {
	x := w.rng.IntN(100)
	switch {
	case len(w.toks) >= maxTokens || len(w.toks) > 0 && x < 50:
		w.release(w.rng.IntN(len(w.toks)))
	case len(w.toks) > 0 && x < 62:
		w.forget(w.rng.IntN(len(w.toks)))
	case x < 75:
		w.tryAcquire()
	case x < 93:
		w.acquire()
	default:
		w.tryRelease()
	}
	if w.rng.IntN(8) == 0 {
		runtime.Gosched() // hold what was just taken a little longer
	}
}

// weight picks how many permits to ask for: mostly one, sometimes a few,
// now and then up to the maximum, which waits for the limit to reach it.
func (w *worker) weight() int64 {
	max := w.r.cfg.max
	switch x := w.rng.IntN(100); {
	case x < 70:
		return 1
	case x < 97:
		return min(max, 2+w.rng.Int64N(3))
	default:
		return 1 + w.rng.Int64N(max)
	}
}

// acquireCtx returns the context for a blocking acquire: the epoch's own,
// one with a short deadline, or one that another goroutine cancels after a
// short while. A worker that holds tokens never waits without a deadline:
// if every permit were held by workers waiting for more, nothing would move
// until the next pause.
func (w *worker) acquireCtx() (context.Context, func(), string) {
	parent := w.r.epoch.Load().ctx
	d := time.Duration(20+w.rng.IntN(2000)) * time.Microsecond
	switch x := w.rng.IntN(10); {
	case x < 4 && len(w.toks) == 0:
		return parent, func() {}, "plain"
	case x < 7:
		ctx, cancel := context.WithTimeout(parent, d)
		return ctx, cancel, "deadline"
	default:
		ctx, cancel := context.WithCancel(parent)
		t := time.AfterFunc(d, cancel)
		return ctx, func() { t.Stop(); cancel() }, "cancel"
	}
}

func (w *worker) acquire() {
	n := w.weight()
	ctx, done, kind := w.acquireCtx()
	defer done()
	ph := w.r.phase.Load()
	tok := new(token.Token)
	var err error
	*tok, err = w.r.sem.Acquire(ctx, n)
	switch {
	case err == nil:
		w.c.acquireOK++
		w.resultChecks++
		w.took(tok, n, ph)
	case ctx.Err() != nil && err == ctx.Err():
		switch {
		case w.r.epoch.Load().ctx.Err() != nil || w.r.pauseReq.Load() != nil:
			w.c.acquirePaused++
		case kind == "deadline":
			w.c.acquireDeadline++
		default:
			w.c.acquireCancelled++
		}
		w.cancelled.Add(1)
		w.resultChecks++
	case errors.Is(err, atomicsem.ErrClosed) && w.r.stopping.Load():
		w.c.acquireClosed++
		w.resultChecks++
	default:
		w.r.checks.acquireResult.failf("Acquire(ctx, %d) returned %v with ctx.Err() = %v, closing %t",
			n, err, ctx.Err(), w.r.stopping.Load())
	}
}

func (w *worker) tryAcquire() {
	n := w.weight()
	ph := w.r.phase.Load()
	tok := new(token.Token)
	var ok bool
	*tok, ok = w.r.sem.TryAcquire(n)
	if !ok {
		w.c.tryFail++
		return
	}
	w.c.tryOK++
	w.took(tok, n, ph)
}

// took checks and keeps a token just acquired for n permits; ph is the phase
// loaded before the acquire began.
func (w *worker) took(tok *token.Token, n int64, ph *phase) {
	if got := tok.Permits(); got != n {
		w.r.checks.acquireResult.failf("a token for %d permits holds %d", n, got)
	}
	w.toks = append(w.toks, tok)
	h := w.r.holders.Add(n)
	for p := w.r.peak.Load(); h > p && !w.r.peak.CompareAndSwap(p, h); p = w.r.peak.Load() {
	}
	if h > w.r.cfg.max {
		w.r.checks.holdersMax.failf("%d permits held by live tokens, max %d", h, w.r.cfg.max)
	} else {
		w.maxChecks++
	}
	// Only an acquire that began and ended in the same steady phase was
	// granted under that phase's limit; every acquire since then was too,
	// so the holders counted now fit in it.
	if ph.steady && w.r.phase.Load() == ph {
		if h > ph.limit {
			w.r.checks.holdersLimit.failf("%d permits held by live tokens, steady limit %d", h, ph.limit)
		} else {
			w.limitChecks++
		}
	}
}

// drop removes token i from the worker's list and uncounts its permits,
// before the caller ends it, so that holders never runs ahead of the
// semaphore's own count.
func (w *worker) drop(i int) *token.Token {
	tok := w.toks[i]
	w.toks[i] = w.toks[len(w.toks)-1]
	w.toks = w.toks[:len(w.toks)-1]
	w.r.holders.Add(-tok.Permits())
	return tok
}

func (w *worker) release(i int) {
	w.drop(i).Release()
	w.c.released++
}

// forget forgets token i, if the limit may move now and the semaphore is
// not in debt; otherwise it releases it.
func (w *worker) forget(i int) {
	r := w.r
	r.limitMu.RLock()
	defer r.limitMu.RUnlock()
	if r.phase.Load().steady || !r.noDebt.Load() {
		w.release(i)
		w.c.forgetAsRelease++
		return
	}
	tok := w.drop(i)
	n := tok.Permits()
	tok.Forget()
	r.forgot.Add(n)
	r.sinceSet.Add(-n)
	w.c.forgotten++
}

// tryRelease adds a permit or two, unless the limit is being held steady.
func (w *worker) tryRelease() {
	r := w.r
	n := 1 + w.rng.Int64N(2)
	r.limitMu.RLock()
	defer r.limitMu.RUnlock()
	if r.phase.Load().steady {
		return
	}
	if r.sem.TryRelease(n) {
		r.added.Add(n)
		r.sinceSet.Add(n)
		w.c.tryReleaseOK++
	} else {
		w.c.tryReleaseFail++
	}
}

func (w *worker) releaseAll() {
	for len(w.toks) > 0 {
		w.release(len(w.toks) - 1)
	}
}

// finish ends the worker: its tokens go back, and its tallies join the run's.
func (w *worker) finish() {
	w.releaseAll()
	w.r.checks.holdersMax.passN(w.maxChecks)
	w.r.checks.holdersLimit.passN(w.limitChecks)
	w.r.checks.acquireResult.passN(w.resultChecks)
	w.r.mu.Lock()
	w.r.counts.add(&w.c)
	w.r.mu.Unlock()
	w.finished.Store(true)
}
