package atomicsem_test

// Races between a semaphore's calls, as outcome tables: each test runs one
// small race many times. The actors end tokens too, each its own token (a
// token is not for concurrent use), racing the calls that move the limit.
// An iteration builds a fresh semaphore, starts the actors behind a start
// gate, waits for them all, and names the outcome it can observe (which
// calls succeeded or panicked, the final Stats). The outcomes are counted in
// a table; every outcome must be one that some sequential order of the same
// calls produces, computed from the reference model in internal/model, so a
// forbidden outcome fails the test with the table.
//
// Built with -tags atomicsem_hooks, helpers_hooks_test.go makes every hook
// site yield at random, which shakes out interleavings that the plain build
// reaches rarely.

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sync/atomic"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/internal/model"
	"github.com/atomicsem/atomicsem/token"
)

var raceIters = flag.Int("race.iters", 0,
	"iterations of each token race; 0 means 100000, or 20000 under -race, or 2000 with -short")

// installRaceHook, when set (by helpers_hooks_test.go in the hooks build),
// installs a hook that perturbs the races and returns a function that
// removes it.
var installRaceHook func() (restore func())

// iterations returns how many times each race runs.
func iterations() int {
	switch {
	case *raceIters > 0:
		return *raceIters
	case testing.Short():
		return 2000
	case raceEnabled:
		// The race detector slows each iteration about tenfold; this keeps
		// the default run of all races within a minute on two cores.
		return 20000
	}
	return 100000
}

// race runs the actors concurrently and returns what each did: "ok", or
// "panic" for a panic with the token package's prefix. Any other panic is
// recorded with its value, which no allowed outcome contains.
//
// The actors are started in a random order and spin at a start gate until
// all are running, then each spins a random few rounds more before acting:
// with fewer processors than actors, a plain gate would run them in nearly
// the same order every time and leave most outcomes unseen.
func race(actors ...func() string) []string {
	res := make([]string, len(actors))
	var ready atomic.Int32
	var start atomic.Bool
	var wg sync.WaitGroup
	for _, i := range rand.Perm(len(actors)) {
		delay := rand.IntN(64)
		wg.Go(func() {
			ready.Add(1)
			for !start.Load() {
				runtime.Gosched()
			}
			// A random number of further atomic loads: a short spin that
			// staggers the actors' first steps.
			for j := 0; j < delay && start.Load(); j++ {
			}
			res[i] = runActor(actors[i])
		})
	}
	for ready.Load() < int32(len(actors)) {
		runtime.Gosched()
	}
	start.Store(true)
	wg.Wait()
	return res
}

func runActor(act func() string) (out string) {
	defer func() {
		if r := recover(); r != nil {
			if strings.HasPrefix(fmt.Sprint(r), "token: ") {
				out = "panic"
				return
			}
			out = fmt.Sprintf("panic(%v)", r)
		}
	}()
	return act()
}

// outcome formats the observable end of an iteration: the actors' results
// in order and the final Stats.
func outcome(results []string, st atomicsem.Stats) string {
	return fmt.Sprintf("%s | avail=%d held=%d limit=%d waiters=%d closed=%t",
		strings.Join(results, " "), st.Available, st.Held, st.Limit, st.Waiters, st.Closed)
}

// world is the sequential state a race is checked against: the model
// semaphore and, for each token of the setup, whether it is spent.
type world struct {
	sem   model.Semaphore
	spent [2]bool
}

// step is one actor's operation applied to a world; it returns the actor's
// result as race reports it.
type step func(w *world) string

// allowedOutcomes returns, sorted, the outcome of every order of steps
// applied to init.
func allowedOutcomes(init world, steps ...step) []string {
	set := map[string]bool{}
	order := make([]int, len(steps))
	for i := range order {
		order[i] = i
	}
	var permute func(k int)
	permute = func(k int) {
		if k == len(order) {
			w := init
			results := make([]string, len(steps))
			for _, i := range order {
				results[i] = steps[i](&w)
			}
			st := w.sem.Stats()
			set[outcome(results, atomicsem.Stats{
				Available: st.Available, Held: st.Held, Limit: st.Limit, Closed: st.Closed,
			})] = true
			return
		}
		for i := k; i < len(order); i++ {
			order[k], order[i] = order[i], order[k]
			permute(k + 1)
			order[k], order[i] = order[i], order[k]
		}
	}
	permute(0)
	return slices.Sorted(maps.Keys(set))
}

func releaseStep(tok int, n int64) step {
	return func(w *world) string {
		if w.spent[tok] {
			return "panic"
		}
		w.spent[tok] = true
		w.sem.Release(n)
		return "ok"
	}
}

func forgetStep(tok int, n int64) step {
	return func(w *world) string {
		if w.spent[tok] {
			return "panic"
		}
		w.spent[tok] = true
		w.sem.Forget(n)
		return "ok"
	}
}

func boolResult(ok bool) string {
	if ok {
		return "ok"
	}
	return "fail"
}

func errResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case err == atomicsem.ErrClosed:
		return "closed"
	}
	return err.Error()
}

// runRace runs iterate the configured number of times, counts the outcomes
// it returns, logs the table and fails on any outcome not in allowed.
func runRace(t *testing.T, allowed []string, iterate func(t *testing.T) string) {
	if installRaceHook != nil {
		defer installRaceHook()()
	}
	n := iterations()
	table := map[string]int{}
	began := time.Now()
	for i := range n {
		o := iterate(t)
		table[o]++
		if !slices.Contains(allowed, o) {
			n = i + 1 // one forbidden outcome decides; stop before the next costs seconds
			break
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d iterations in %v (hooks: %t, race detector: %t)\n",
		n, time.Since(began).Round(time.Millisecond), installRaceHook != nil, raceEnabled)
	var forbidden []string
	for _, o := range slices.Sorted(maps.Keys(table)) {
		mark := "allowed  "
		if !slices.Contains(allowed, o) {
			mark = "FORBIDDEN"
			forbidden = append(forbidden, o)
		}
		fmt.Fprintf(&b, "  %s %8d  %s\n", mark, table[o], o)
	}
	for _, o := range allowed {
		if table[o] == 0 {
			fmt.Fprintf(&b, "  allowed  %8d  %s\n", 0, o)
		}
	}
	t.Log(b.String())
	require.Empty(t, forbidden, "outcomes no sequential order produces")
}

// Release ‖ TryAcquire ‖ Forget ‖ TryRelease ‖ SetLimit on one semaphore:
// every final state, with which calls succeeded, must be that of one of the
// 120 orders of the five calls.
func TestRaceMixedOperationsOnOneSemaphore(t *testing.T) {
	// New(2, 4) with two tokens of 1 taken: token 0 is released, token 1
	// forgotten.
	init := world{sem: model.Semaphore{Available: 0, Limit: 2, Max: 4}}
	allowed := allowedOutcomes(init,
		releaseStep(0, 1),
		func(w *world) string { return boolResult(w.sem.TryAcquire(1)) },
		forgetStep(1, 1),
		func(w *world) string { return boolResult(w.sem.TryRelease(1)) },
		func(w *world) string { return boolResult(w.sem.SetLimit(3) == model.OK) },
	)
	runRace(t, allowed, func(t *testing.T) string {
		s := mustNew(t, 2, 4)
		released, forgotten := mustTake(t, s, 1), mustTake(t, s, 1)
		var got token.Token
		res := race(
			func() string { released.Release(); return "ok" },
			func() string {
				var ok bool
				got, ok = s.TryAcquire(1)
				return boolResult(ok)
			},
			func() string { forgotten.Forget(); return "ok" },
			func() string { return boolResult(s.TryRelease(1)) },
			func() string { return boolResult(s.SetLimit(3) == nil) },
		)
		o := outcome(res, s.Stats())
		if got.Permits() > 0 {
			got.Release()
		}
		return o
	})
}

// Close ‖ Release ‖ Forget ‖ TryRelease ‖ SetLimit on one word (the
// tokio-rs/tokio#8020 shape): the closed flag survives every interleaving,
// and each call sees the semaphore either open or closed, never a mix.
func TestRaceCloseAgainstWordChanges(t *testing.T) {
	// New(3, 4) with two tokens of 1 taken: token 0 is released, token 1
	// forgotten.
	init := world{sem: model.Semaphore{Available: 1, Limit: 3, Max: 4}}
	allowed := allowedOutcomes(init,
		func(w *world) string { w.sem.Close(); return "ok" },
		releaseStep(0, 1),
		forgetStep(1, 1),
		func(w *world) string { return boolResult(w.sem.TryRelease(1)) },
		func(w *world) string { return errResult(modelErr(w.sem.SetLimit(2))) },
	)
	runRace(t, allowed, func(t *testing.T) string {
		s := mustNew(t, 3, 4)
		released, forgotten := mustTake(t, s, 1), mustTake(t, s, 1)
		res := race(
			func() string { s.Close(); return "ok" },
			func() string { released.Release(); return "ok" },
			func() string { forgotten.Forget(); return "ok" },
			func() string { return boolResult(s.TryRelease(1)) },
			func() string { return errResult(s.SetLimit(2)) },
		)
		return outcome(res, s.Stats())
	})
}

func modelErr(o model.Outcome) error {
	if o == model.Closed {
		return atomicsem.ErrClosed
	}
	return nil
}

// A parked waiter's cancellation ‖ the release that would grant it, with a
// second waiter behind it (the golang/go#63615 shape): either the first
// waiter gets the permit, or it returns ctx.Err() and the permit reaches the
// second waiter. A permit that reaches nobody is a lost wake-up.
func TestRaceCancelAgainstGrant(t *testing.T) {
	allowed := []string{
		"first=ok second=parked | avail=0 held=1 limit=1 waiters=1 closed=false",
		"first=context canceled second=ok | avail=0 held=1 limit=1 waiters=0 closed=false",
	}
	runRace(t, allowed, func(t *testing.T) string {
		return cancelAndRelease(t, mustNew(t, 1, 1), func(cancel, release func()) {
			race(
				func() string { cancel(); return "ok" },
				func() string { release(); return "ok" },
			)
		})
	})
}

// A parked waiter's cancellation, then the release that would grant it,
// in that order, with a second waiter behind it (the order x/sync's
// TestWeightedAcquireCanceled checks): the first waiter may notice its ctx
// before or after the grant, but a done ctx wins either way, so it returns
// ctx.Err() and the permit reaches the second waiter.
func TestRaceCancelThenGrant(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		allowed := []string{
			"first=context canceled second=ok | avail=0 held=1 limit=1 waiters=0 closed=false",
		}
		runRace(t, allowed, func(t *testing.T) string {
			return cancelAndRelease(t, mustNew(t, 1, 1, opts...), func(cancel, release func()) {
				cancel()
				release()
			})
		})
	})
}

// cancelAndRelease is one iteration of the cancellation races on s, a
// semaphore of one permit: with the permit held, a first waiter parks, a
// second parks behind it, and act cancels the first waiter's ctx and
// releases the permit, in the order or the race it stages. It returns the
// outcome: what each waiter got (a second waiter that the permit never
// reaches shows as a lost wake-up) and the final Stats. It leaves nothing
// parked: it releases whatever was granted, and closes s if a permit
// reached nobody.
func cancelAndRelease(t *testing.T, s *atomicsem.Semaphore, act func(cancel, release func())) string {
	held := mustTake(t, s, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	first := goAcquire(ctx, s, 1)
	awaitWaiters(s, 1)
	second := goAcquire(t.Context(), s, 1)
	awaitWaiters(s, 2)

	act(cancel, held.Release)
	<-first.done
	secondState := "parked"
	if first.err != nil && !second.returnsWithin(5*time.Second) {
		secondState = "parked (lost wake-up)"
	}
	if second.returned() {
		secondState = errResult(second.err)
	}
	o := outcome([]string{fmt.Sprintf("first=%s second=%s", errResult(first.err), secondState)}, s.Stats())

	if first.err == nil {
		first.tok.Release()
	}
	if !second.returnsWithin(5 * time.Second) {
		s.Close()
		<-second.done
	}
	if second.err == nil {
		second.tok.Release()
	}
	return o
}
