package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/atomicsem/atomicsem/credit"
	"github.com/atomicsem/atomicsem/token"
)

// The credit workload (-credit): goroutines spend and reserve credit from
// one credit.Bucket with a mix of TrySpend, Spend (with cancellations and
// deadlines), TryAcquire and Acquire, settling reservations by Split,
// Forget and Release, while a monitor checks, over every window it has
// seen, that the credit spent is no more than the bucket could have held
// (no over-credit). In a second phase every worker only waits in Spend,
// so that demand always waits, and the credit spent must then keep up with
// the accrual (no lost accrual).
//
// The spends are counted twice: claimed is raised before a call that may
// spend and lowered if it did not, spent is raised after one that did. So
// at any moment spent ≤ the credit truly spent ≤ claimed, and a window
// from a sample of claimed to a later sample of spent never overstates
// what was spent in it.

// creditRunner is the state shared by the credit workload's goroutines.
type creditRunner struct {
	cfg    config
	b      *credit.Bucket
	checks creditChecks
	start  time.Time // read before the bucket was made

	claimed, spent atomic.Int64
	ops            atomic.Int64
	demandOnly     atomic.Bool // the second phase: workers only wait in Spend
	stopping       atomic.Bool

	mu     sync.Mutex
	counts creditCounts // guarded by mu
	worst  float64      // the largest deficit seen in the demand phase, in credits; guarded by mu
}

type creditCounts struct {
	trySpendOK, trySpendFail                     int64
	spendOK, spendCancelled, spendDeadline       int64
	reserveOK, reserveFail, forgotten, released  int64
	creditSpent, creditReturned, creditForgotten int64
}

func (c *creditCounts) add(o *creditCounts) {
	c.trySpendOK += o.trySpendOK
	c.trySpendFail += o.trySpendFail
	c.spendOK += o.spendOK
	c.spendCancelled += o.spendCancelled
	c.spendDeadline += o.spendDeadline
	c.reserveOK += o.reserveOK
	c.reserveFail += o.reserveFail
	c.forgotten += o.forgotten
	c.released += o.released
	c.creditSpent += o.creditSpent
	c.creditReturned += o.creditReturned
	c.creditForgotten += o.creditForgotten
}

// creditChecks are the invariants the credit workload verifies.
type creditChecks struct {
	cumulative, window, demand, statsSane, result, rest, progress check
}

func (c *creditChecks) all() []*check {
	return []*check{&c.cumulative, &c.window, &c.demand, &c.statsSane, &c.result, &c.rest, &c.progress}
}

func newCreditChecks() creditChecks {
	return creditChecks{
		cumulative: check{what: "credit spent never exceeds initial + rate·elapsed (no over-credit)"},
		window:     check{what: "in every window sampled, credit spent ≤ burst + rate·window (no over-credit)"},
		demand:     check{what: "with demand always waiting, credit spent ≥ rate·elapsed − burst (no lost accrual)"},
		statsSane:  check{what: "Stats is consistent (0 ≤ Balance, Balance + Reserved ≤ Burst)"},
		result:     check{what: "Spend and Acquire return nil or a token, or ctx.Err() unwrapped"},
		rest:       check{what: "at rest: Reserved == 0, Waiters == 0, Balance ≤ Burst"},
		progress:   check{what: "the workload never stalls: credit is spent in every second"},
	}
}

// demandSlack is how far behind the accrual the demand phase may fall
// beyond the burst: the waiters' wake-up latency on a loaded machine.
const demandSlack = 200 * time.Millisecond

// maxRequest is the most credit one call of the workload asks for.
const maxRequest = 4

// runCredit runs the credit workload described by cfg, prints its report
// and returns whether every invariant held.
func runCredit(cfg config) bool {
	if cfg.progressEvery == 0 {
		cfg.progressEvery = 2 * time.Second
	}
	r := &creditRunner{cfg: cfg, checks: newCreditChecks(), start: time.Now()}
	r.b = credit.MustNew(cfg.rate, cfg.burst)
	fmt.Fprintf(cfg.out, "credit stress: %v, %d goroutines, a bucket of %v credits a second up to %d, seed %d\n",
		cfg.duration, cfg.goroutines, cfg.rate, cfg.burst, cfg.seed)
	fmt.Fprintln(cfg.out, "progress: elapsed, operations so far, credits spent so far, credits in the balance"+
		" and reserved now, Spend and Acquire calls waiting now")

	stop := make(chan struct{})
	var mon sync.WaitGroup
	mon.Go(func() { r.monitor(stop) })
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	for i := range cfg.goroutines {
		rng := rand.New(rand.NewPCG(cfg.seed, uint64(i)))
		wg.Go(func() { r.work(ctx, rng) })
	}
	time.Sleep(cfg.duration * 3 / 5)
	r.demandOnly.Store(true)
	r.demandPhase(cfg.duration * 2 / 5)
	r.stopping.Store(true)
	cancel()
	wg.Wait()
	close(stop)
	mon.Wait()

	st := r.b.Stats()
	r.checks.rest.expect(st.Reserved == 0 && st.Waiters == 0 && st.Balance <= st.Burst,
		"at rest: %+v", st)
	r.creditReport()
	for _, c := range r.checks.all() {
		if c.failed.Load() > 0 {
			return false
		}
	}
	return true
}

// work runs one worker's operations until the run stops.
func (r *creditRunner) work(ctx context.Context, rng *rand.Rand) {
	var c creditCounts
	defer func() {
		r.mu.Lock()
		r.counts.add(&c)
		r.mu.Unlock()
	}()
	for !r.stopping.Load() {
		n := 1 + rng.Int64N(maxRequest)
		switch op := rng.IntN(10); {
		case r.demandOnly.Load() || op < 1:
			r.claimed.Add(n)
			wctx, cancel := ctx, context.CancelFunc(func() {})
			if !r.demandOnly.Load() && rng.IntN(3) == 0 {
				wctx, cancel = context.WithTimeout(ctx, time.Duration(rng.Int64N(int64(5*time.Millisecond))))
			}
			err := r.b.Spend(wctx, n)
			cancel()
			r.countResult(err, ctx, n, &c)
		case op < 6:
			r.claimed.Add(n)
			if r.b.TrySpend(n) {
				r.spent.Add(n)
				c.trySpendOK++
				c.creditSpent += n
			} else {
				r.claimed.Add(-n)
				c.trySpendFail++
			}
		default:
			r.reserve(ctx, rng, n, op < 8, &c)
		}
		r.ops.Add(1)
	}
}

// countResult counts a Spend's outcome and checks its error.
func (r *creditRunner) countResult(err error, ctx context.Context, n int64, c *creditCounts) {
	switch {
	case err == nil:
		r.spent.Add(n)
		c.spendOK++
		c.creditSpent += n
		return
	case errors.Is(err, context.DeadlineExceeded) && err == context.DeadlineExceeded:
		c.spendDeadline++
	case err == context.Canceled && ctx.Err() != nil:
		c.spendCancelled++
	default:
		r.checks.result.failf("Spend(%d) returned %v", n, err)
	}
	r.claimed.Add(-n)
}

// reserve takes a reservation, waiting for it (Acquire, with a short
// deadline) or not (TryAcquire), and settles it: a random part forgotten,
// the rest released.
func (r *creditRunner) reserve(ctx context.Context, rng *rand.Rand, n int64, wait bool, c *creditCounts) {
	var tok token.Token
	if wait {
		tctx, cancel := context.WithTimeout(ctx, time.Duration(rng.Int64N(int64(5*time.Millisecond))))
		var err error
		tok, err = r.b.Acquire(tctx, n)
		cancel()
		if err != nil {
			if err != context.DeadlineExceeded && err != context.Canceled {
				r.checks.result.failf("Acquire(%d) returned %v", n, err)
			}
			c.reserveFail++
			return
		}
	} else {
		var ok bool
		if tok, ok = r.b.TryAcquire(n); !ok {
			c.reserveFail++
			return
		}
	}
	c.reserveOK++
	r.checks.result.expect(tok.Permits() == n, "a reservation of %d holds %d", n, tok.Permits())
	k := rng.Int64N(n + 1)
	part, _ := tok.Split(k)
	r.claimed.Add(k)
	part.Forget()
	r.spent.Add(k)
	c.forgotten++
	c.creditForgotten += k
	c.creditSpent += k
	c.creditReturned += tok.Permits()
	tok.Release()
	c.released++
}

// sample is one look at the counters: claimed read after at, spent read
// before it, so that a window from one sample's claimed to a later one's
// spent never overstates the credit spent in it.
type sample struct {
	at             time.Duration // since start
	claimed, spent int64
}

// take reads the counters and the clock in the order sample needs.
func (r *creditRunner) take() sample {
	var s sample
	s.spent = r.spent.Load()
	s.at = time.Since(r.start)
	s.claimed = r.claimed.Load()
	return s
}

// monitor samples the counters and Stats until stop is closed, checking
// every window between the samples it keeps against the burst and rate.
func (r *creditRunner) monitor(stop <-chan struct{}) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var history []sample // the last few hundred samples, oldest first
	burst, rate := float64(r.cfg.burst), r.cfg.rate
	lastOps, lastMove, lastPrint := int64(0), time.Now(), time.Now()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		now := r.take()
		// Cumulative: everything spent came from the initial balance
		// (the burst) and the accrual since start.
		r.checks.cumulative.expect(float64(now.spent) <= burst+rate*now.at.Seconds(),
			"%d spent in %v, at most %.0f could be", now.spent, now.at, burst+rate*now.at.Seconds())
		for _, old := range history {
			win := now.at - old.at
			bound := burst + rate*win.Seconds()
			if got := now.spent - old.claimed; float64(got) > bound {
				r.checks.window.failf("%d spent in a window of %v, at most %.1f could be", got, win, bound)
				break
			}
		}
		r.checks.window.pass()
		history = append(history, now)
		if len(history) > 400 {
			history = history[100:]
		}

		st := r.b.Stats()
		r.checks.statsSane.expect(st.Balance >= 0 && st.Reserved >= 0 && st.Balance+st.Reserved <= st.Burst,
			"Stats %+v", st)
		if ops := r.ops.Load(); ops != lastOps {
			lastOps, lastMove = ops, time.Now()
			r.checks.progress.pass()
		} else if time.Since(lastMove) > stallAfter {
			r.checks.progress.failf("no operation completed for %v, Stats %+v", stallAfter, st)
			lastMove = time.Now()
		}
		if time.Since(lastPrint) >= r.cfg.progressEvery {
			lastPrint = time.Now()
			fmt.Fprintf(r.cfg.out, "%6.1fs  %11d ops  spent %9d  balance %6d  reserved %6d  waiting %4d\n",
				now.at.Seconds(), r.ops.Load(), now.spent, st.Balance, st.Reserved, st.Waiters)
		}
	}
}

// demandPhase runs for d with every worker waiting in Spend, and checks
// that the credit spent keeps up with the accrual: over the phase, and at
// every sample, spent ≥ rate·elapsed − burst, less the waiters' wake-up
// latency.
func (r *creditRunner) demandPhase(d time.Duration) {
	time.Sleep(demandSlack) // let the workers of the mixed phase finish their calls
	first := r.take()
	end := time.Now().Add(d - demandSlack)
	rate, burst := r.cfg.rate, float64(r.cfg.burst)
	for time.Now().Before(end) {
		time.Sleep(20 * time.Millisecond)
		// A lower bound needs the window understated: the sample's
		// spent is read before its clock, and first's claimed after.
		s := r.take()
		got := float64(s.spent - first.claimed)
		want := rate*(s.at-first.at-demandSlack).Seconds() - burst - float64(r.cfg.goroutines*maxRequest)
		r.mu.Lock()
		r.worst = max(r.worst, rate*(s.at-first.at).Seconds()-got)
		r.mu.Unlock()
		r.checks.demand.expect(got >= want, "%.0f spent in %v of waiting demand, want at least %.0f",
			got, s.at-first.at, want)
	}
}

// creditReport prints what the credit workload did and every invariant's
// result.
func (r *creditRunner) creditReport() {
	r.mu.Lock()
	c, worst := r.counts, r.worst
	r.mu.Unlock()
	elapsed := time.Since(r.start)
	out := r.cfg.out
	fmt.Fprintf(out, "\nran %v: %d operations (seed %d)\n", elapsed.Round(time.Millisecond), r.ops.Load(), r.cfg.seed)
	fmt.Fprintln(out, "calls, by outcome:")
	fmt.Fprintf(out, "  TrySpend    %d took credit, %d refused\n", c.trySpendOK, c.trySpendFail)
	fmt.Fprintf(out, "  Spend       %d took credit, %d cancelled, %d past their deadline\n",
		c.spendOK, c.spendCancelled, c.spendDeadline)
	fmt.Fprintf(out, "  Acquire     %d reserved credit, %d refused or past their deadline\n", c.reserveOK, c.reserveFail)
	fmt.Fprintf(out, "  settling    %d Forget and %d Release calls on reserved credit (a reservation split in two ends both ways)\n", c.forgotten, c.released)
	fmt.Fprintf(out, "credits:\n  %d spent (%d of them by forgotten reservations), %d returned unused, %.0f accrued at the rate\n",
		c.creditSpent, c.creditForgotten, c.creditReturned, r.cfg.rate*elapsed.Seconds())
	r.checks.demand.setDetail(fmt.Sprintf("largest lag behind the accrual %.0f credits (burst %d)", worst, r.cfg.burst))
	printInvariants(out, r.checks.all(), r.cfg.seed)
}
