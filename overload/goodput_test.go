package overload_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/overload"
)

// The simulated backend of TestCriticalKeepsItsGoodputBesideSheddable:
// the overload experiment's (bench/overload), 8 slots of 100 ms, its
// clients' deadline 1 s, measured after a warm-up.
const (
	simSlots   = 8
	simService = 100 * time.Millisecond
	simTimeout = time.Second
	simWarmup  = time.Second
	simMeasure = 5 * time.Second
)

// simArrival is one request of an open-loop schedule: when, and whether it
// is critical (class 0) or sheddable (class 1).
type simArrival struct {
	at    time.Duration
	class int
}

// simSchedule returns Poisson arrivals at rate a second over the warm-up
// and the measure, each critical or sheddable with even odds, from seed.
func simSchedule(seed uint64, rate float64) []simArrival {
	rng := rand.New(rand.NewPCG(seed, 60))
	var out []simArrival
	for at := time.Duration(0); ; {
		at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		if at >= simWarmup+simMeasure {
			return out
		}
		out = append(out, simArrival{at: at, class: rng.IntN(2)})
	}
}

// simServed offers arrs to a gate at the backend's capacity in its
// overload mode, each admitted request holding its permit for the service
// time, in a testing/synctest bubble, and returns the requests of each
// class served among those that arrived after the warm-up.
func simServed(t *testing.T, arrs []simArrival) (served [2]int) {
	synctest.Test(t, func(t *testing.T) {
		g := overload.MustNew(simSlots, simSlots, classes(0, 0), overload.WithCoDel(0, 0))
		var mu sync.Mutex
		var wg sync.WaitGroup
		begin := time.Now()
		for _, a := range arrs {
			time.Sleep(a.at - time.Since(begin))
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), simTimeout)
				defer cancel()
				tok, err := g.Acquire(ctx, a.class, 1)
				if err != nil {
					return
				}
				time.Sleep(simService)
				tok.Release()
				if a.at >= simWarmup {
					mu.Lock()
					served[a.class]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	})
	return served
}

// TestCriticalKeepsItsGoodputBesideSheddable is the overload experiment's
// target, in fake time: offered twice and four times a backend's capacity,
// half critical and half sheddable, a gate in its overload mode serves the
// critical half at least 0.99 of what it serves of the same critical
// arrivals alone. The counts are pooled over twenty schedules, since one
// schedule's ratio moves by a few hundredths with the arrivals: the gate's
// decisions change who is served after them, which diverges from the run
// alone. Twice the capacity is the hard case: the critical half alone is
// about the capacity, so its queue empties now and then, and what is let in
// then must not take what its next burst needs.
func TestCriticalKeepsItsGoodputBesideSheddable(t *testing.T) {
	for _, load := range []float64{2, 4} {
		var alone, mixed [2]int
		for i := range 20 {
			arrs := simSchedule(uint64(load*10)+uint64(i)*1000, load*simSlots*float64(time.Second/simService))
			var crit []simArrival
			for _, a := range arrs {
				if a.class == 0 {
					crit = append(crit, a)
				}
			}
			a, m := simServed(t, crit), simServed(t, arrs)
			alone[0] += a[0]
			mixed[0] += m[0]
			mixed[1] += m[1]
		}
		ratio := float64(mixed[0]) / float64(alone[0])
		t.Logf("%gx: critical served %d beside sheddable (%.3f of %d alone), sheddable %d", load, mixed[0], ratio, alone[0], mixed[1])
		require.GreaterOrEqual(t, ratio, 0.99, fmt.Sprintf("%gx: critical goodput against its run alone", load))
	}
}
