package overload_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/atomicsem/atomicsem/overload"
	"github.com/atomicsem/atomicsem/token"
)

// FuzzGateAgainstModel drives a Gate and the model with the same random
// arrivals (Acquire of random classes and sizes, some cancellable, some with
// deadlines), TryAcquires, releases, cancellations, limit changes, time
// passing and Close, in a testing/synctest bubble, and after every step
// compares the gate's Stats and every decided request with the model's. It
// also checks, from the gate's Stats alone, the laws the model is meant to
// keep:
//
//   - the global limit: a step in which the permits held rose ends with
//     them at or below the limit;
//   - each class's ceiling, likewise;
//   - the guarantee: while a waiter that fits in its class's unused reserve
//     waits, from one step to the next, no class beyond its own reserve
//     gains a permit.
//
// Configurations vary: one to four classes, shares and ceilings in
// sixteenths, a bounded or unbounded queue, a maximum wait, the overload
// mode, a starvation bound.
func FuzzGateAgainstModel(f *testing.F) {
	for _, seed := range [][]byte{
		{2, 8, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 3, 1, 4, 0, 7, 50},
		{4, 4, 4, 4, 4, 0, 12, 0, 0, 3, 2, 1, 9, 0, 1, 2, 0, 5, 1, 4, 0, 6, 3, 7, 90, 0, 3, 0, 4, 1},
		{3, 16, 0, 0, 8, 8, 0, 5, 40, 1, 1, 0, 0, 0, 1, 0, 2, 0, 7, 200, 7, 200, 4, 0, 0, 2, 7, 100, 7, 100},
		{2, 0, 16, 0, 16, 6, 30, 2, 6, 0, 0, 0, 0, 1, 0, 2, 1, 1, 0, 2, 2, 7, 10, 7, 10, 7, 10, 0, 1, 7, 60, 4, 0},
		{1, 0, 0, 3, 10, 10, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 2, 5, 0, 6, 1, 6, 9, 4, 1, 4, 2},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		synctest.Test(t, func(t *testing.T) { runModel(t, data) })
	})
}

// fuzzBytes hands out the fuzzer's bytes, zeros once they run out.
type fuzzBytes struct {
	b []byte
	i int
}

func (r *fuzzBytes) next() int {
	if r.i >= len(r.b) {
		r.i++
		return 0
	}
	r.i++
	return int(r.b[r.i-1])
}

func (r *fuzzBytes) done() bool { return r.i >= len(r.b) }

type harnessWaiter struct {
	mw     *mWaiter
	cancel context.CancelFunc
}

type heldToken struct {
	tok   *token.Token
	class int
	n     int64
}

type result struct {
	id  int
	tok *token.Token
	err error
}

func runModel(t *testing.T, data []byte) {
	r := &fuzzBytes{b: data}
	start := time.Now()
	now := func() time.Duration { return time.Since(start) }

	// The configuration.
	k := 1 + r.next()%overload.MaxClasses
	classes := make([]overload.Class, k)
	left := 16
	m := &model{k: k}
	for c := range classes {
		share := r.next() % (left + 1)
		left -= share
		ms := r.next() % 17
		if ms != 0 && ms < share {
			ms = share
		}
		classes[c] = overload.Class{Name: fmt.Sprint("c", c), Share: float64(share) / 16, MaxShare: float64(ms) / 16}
		cum := int64(share) * one / 16
		if c > 0 {
			cum += m.cum[c-1]
		}
		m.cum = append(m.cum, cum)
		if ms == 0 {
			m.maxShare = append(m.maxShare, one)
		} else {
			m.maxShare = append(m.maxShare, max(int64(ms)*one/16, int64(share)*one/16))
		}
	}
	maxLimit := int64(1 + r.next()%12)
	limit := int64(r.next()) % (maxLimit + 1)
	var opts []overload.Option
	if q := r.next() % 8; q > 0 && q < 6 {
		m.maxQueue = q
		opts = append(opts, overload.WithMaxQueue(q))
	}
	if w := r.next() % 6; w > 0 && w < 4 {
		// Maximum waits end half a microsecond off the steps' whole
		// microseconds, so that no two timers of the bubble fire at once.
		m.maxWait = time.Duration(w)*4*time.Millisecond + 500*time.Nanosecond
		opts = append(opts, overload.WithMaxWait(m.maxWait))
	}
	if r.next()%2 == 1 {
		m.codel, m.target, m.interval = true, time.Millisecond, 5*time.Millisecond
		opts = append(opts, overload.WithCoDel(m.target, m.interval))
	}
	m.starvation = time.Duration(r.next()%4) * 3 * time.Millisecond
	opts = append(opts, overload.WithStarvationBound(m.starvation))
	g, err := overload.New(limit, maxLimit, classes, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	m.limit = limit
	m.held = make([]int64, k)
	m.queues = make([][]*mWaiter, k)
	m.lifo, m.above, m.served = make([]bool, k), make([]bool, k), make([]bool, k)
	m.since, m.lastG, m.bSince = make([]time.Duration, k), make([]time.Duration, k), make([]time.Duration, k)
	m.below, m.shedOn, m.empty, m.eSince = make([]bool, k), make([]bool, k), make([]bool, k), make([]time.Duration, k)
	m.shed = make([][4]uint64, k)
	m.setBlocks(0)

	var (
		mu      sync.Mutex
		results []result
	)
	waiters := map[int]*harnessWaiter{}
	var held []heldToken
	// However the run ends (a failed check ends it at once), every waiter
	// leaves: the bubble must end with no goroutine blocked.
	defer func() {
		if t.Failed() && overload.LockHeldForTest(g) {
			// Every goroutine of the bubble was blocked at the check, so a
			// lock still held is a broken gate's: closing it would block
			// for ever, and the bubble with it. End the binary instead.
			panic("overload: a check failed with the gate's lock held and every goroutine blocked (-v shows the check)")
		}
		g.Close()
		for _, hw := range waiters {
			if hw.cancel != nil {
				hw.cancel()
			}
		}
	}()
	nextID := 1
	prevHeld, prevClass := int64(0), make([]int64, k)
	owedWaiting := map[int]bool{}

	// check compares the gate with the model after a step and checks the
	// laws.
	check := func(step string) {
		synctest.Wait()
		mu.Lock()
		got := results
		results = nil
		mu.Unlock()
		want := m.events
		m.events = nil
		slices.SortFunc(got, func(a, b result) int { return a.id - b.id })
		slices.SortFunc(want, func(a, b mEvent) int { return a.id - b.id })
		if len(got) != len(want) {
			t.Fatalf("%s: decided %v, the model %v", step, got, want)
		}
		for i := range got {
			if got[i].id != want[i].id || !sameErr(got[i].err, want[i].err) {
				t.Fatalf("%s: decided %v, the model %v", step, got, want)
			}
			hw := waiters[got[i].id]
			delete(waiters, got[i].id)
			if got[i].err == nil {
				held = append(held, heldToken{got[i].tok, hw.mw.class, hw.mw.n})
			}
			if hw.cancel != nil {
				hw.cancel()
			}
		}
		st := g.Stats()
		if st.Limit != m.limit || st.Held != m.total() || st.Waiters != m.queued() || st.Closed != m.closed {
			t.Fatalf("%s: Stats %+v, the model limit %d held %d waiters %d closed %v", step, st, m.limit, m.total(), m.queued(), m.closed)
		}
		for c, cs := range st.Classes {
			mc := [4]uint64{cs.QueueFull, cs.MaxWait, cs.Dropped, cs.Deadline}
			if cs.Held != m.held[c] || cs.Waiters != len(m.queues[c]) || cs.Overloaded != m.lifo[c] || mc != m.shed[c] ||
				cs.Reserve != m.reserve(c) || cs.Ceiling != m.ceiling(c) {
				t.Fatalf("%s: class %d: %+v, the model held %d waiters %d overloaded %v sheds %v reserve %d ceiling %d",
					step, c, cs, m.held[c], len(m.queues[c]), m.lifo[c], m.shed[c], m.reserve(c), m.ceiling(c))
			}
		}
		if got, want := g.Idle(), m.idle(now()); got != want {
			t.Fatalf("%s: Idle %v, the model %v", step, got, want)
		}
		// The laws, from the gate's own Stats.
		if st.Held > prevHeld && st.Held > st.Limit {
			t.Fatalf("%s: the permits held rose to %d, above the limit %d", step, st.Held, st.Limit)
		}
		gained := false
		for c, cs := range st.Classes {
			if cs.Held > prevClass[c] && cs.Held > cs.Ceiling {
				t.Fatalf("%s: class %d rose to %d, above its ceiling %d", step, c, cs.Held, cs.Ceiling)
			}
			if cs.Held > prevClass[c] && cs.Held > cs.Reserve {
				gained = true
			}
		}
		owedNow := map[int]bool{}
		stillOwed := false
		for c := range k {
			if len(m.queues[c]) == 0 {
				continue
			}
			if x := m.next(c); st.Classes[c].Held+x.n <= st.Classes[c].Reserve {
				owedNow[x.id] = true
				stillOwed = stillOwed || owedWaiting[x.id]
			}
		}
		if stillOwed && gained {
			t.Fatalf("%s: a class beyond its reserve gained permits while a waiter owed its reserve waited", step)
		}
		owedWaiting = owedNow
		prevHeld = st.Held
		for c, cs := range st.Classes {
			prevClass[c] = cs.Held
		}
	}

	acquire := func(class int, n int64, kind int, dl time.Duration) {
		id := nextID
		nextID++
		mw := &mWaiter{id: id, class: class, n: n}
		hw := &harnessWaiter{mw: mw}
		ctx := context.Background()
		switch kind {
		case 1:
			ctx, hw.cancel = context.WithCancel(ctx)
		case 2:
			// Deadlines end id nanoseconds off a whole microsecond, so
			// that no two timers of the bubble fire at once.
			mw.deadline = now() + dl + time.Duration(id)*time.Nanosecond
			ctx, hw.cancel = context.WithDeadline(ctx, start.Add(mw.deadline))
		}
		waiters[id] = hw
		go func() {
			tok, err := g.Acquire(ctx, class, n)
			mu.Lock()
			results = append(results, result{id, &tok, err})
			mu.Unlock()
		}()
		if m.fast(class, n) {
			m.events = append(m.events, mEvent{id, nil})
		} else {
			m.arrive(mw, now())
		}
	}

	// advance lets d pass, the model firing the timers the gate's waiters
	// fire, one at a time, in order.
	advance := func(d time.Duration) {
		from := now()
		to := from + d
		for {
			at, w, why, ok := m.timer(from, to)
			if !ok {
				break
			}
			m.withdraw(w, why, at)
			from = at
		}
		time.Sleep(d)
	}

	for step := 0; !r.done() && nextID < 400; step++ {
		advance(time.Microsecond)
		op := r.next()
		switch op % 8 {
		case 0, 1, 2:
			class := r.next() % k
			n := int64(1 + r.next()%3)
			if n > ceilingAtMax(classes[class], maxLimit) {
				continue
			}
			kind := r.next() % 3
			acquire(class, n, kind, time.Duration(1+r.next()%20)*time.Millisecond)
		case 3:
			class := r.next() % k
			n := int64(1 + r.next()%3)
			want := n <= maxLimit && m.fast(class, n)
			tok, ok := g.TryAcquire(class, n)
			if ok != want {
				t.Fatalf("step %d: TryAcquire(%d, %d) = %v, the model %v", step, class, n, ok, want)
			}
			if ok {
				held = append(held, heldToken{&tok, class, n})
			}
		case 4:
			if len(held) == 0 {
				continue
			}
			i := r.next() % len(held)
			h := held[i]
			held = append(held[:i], held[i+1:]...)
			h.tok.Release()
			m.release(h.class, h.n, now())
		case 5:
			ids := pendingCancellable(waiters)
			if len(ids) == 0 {
				continue
			}
			hw := waiters[ids[r.next()%len(ids)]]
			hw.cancel()
			m.withdraw(hw.mw, context.Canceled, now())
		case 6:
			l := int64(r.next()) % (maxLimit + 1)
			if err := g.SetLimit(l); (err != nil) != m.closed {
				t.Fatalf("SetLimit(%d): %v, closed %v", l, err, m.closed)
			}
			m.setLimit(l, now())
		case 7:
			if op == 255 {
				g.Close()
				m.close()
				break
			}
			if op == 247 {
				advance(overload.EstimateMemory) // long enough to forget the estimate
				break
			}
			advance(time.Duration(r.next()) * 100 * time.Microsecond)
		}
		if testing.Verbose() {
			t.Logf("step %d op %d: held %v limit %d queues %v", step, op, m.held, m.limit, m.queueIDs())
		}
		check(fmt.Sprintf("step %d (op %d)", step, op))
	}
	g.Close()
	m.close()
	check("close")
	for _, h := range held {
		h.tok.Release()
	}
}

// sameErr reports whether the gate's error is the model's: both nil, or
// the same sentinel.
func sameErr(got, want error) bool {
	if got == nil || want == nil {
		return got == want
	}
	return errors.Is(got, want)
}

// ceilingAtMax returns what a class could ever hold: its ceiling at the
// gate's maximum limit.
func ceilingAtMax(c overload.Class, max int64) int64 {
	ms := c.MaxShare
	if ms == 0 {
		return max
	}
	ms = max64f(ms, c.Share)
	return (int64(ms*one)*max + one - 1) / one
}

func max64f(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}

// pendingCancellable returns the ids of the waiters still undecided that
// can be cancelled, in order.
func pendingCancellable(ws map[int]*harnessWaiter) []int {
	var ids []int
	for id, hw := range ws {
		if hw.cancel != nil && hw.mw.deadline == 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestGateAgainstModelRandom runs the fuzz target's harness on random
// inputs from fixed seeds, long enough to reach the overload mode, the
// starvation bound, evictions and expected-wait refusals, so that plain
// go test covers what the fuzzer would find first.
func TestGateAgainstModelRandom(t *testing.T) {
	runs := 1000
	switch {
	case testing.Short():
		runs = 50
	case raceEnabled:
		runs = 300 // the race detector makes each run about ten times slower
	}
	for seed := range runs {
		rng := rand.New(rand.NewPCG(uint64(seed), 60))
		data := make([]byte, 64+rng.IntN(600))
		for i := range data {
			data[i] = byte(rng.IntN(256))
		}
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runModel(t, data) })
		})
	}
}
