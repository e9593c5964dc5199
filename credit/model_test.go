package credit_test

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/credit"
	"github.com/atomicsem/atomicsem/token"
)

// model is a credit bucket in continuous time with exact arithmetic: the
// reference the bucket is checked against. Its balance c is a real number
// that grows at rate while c + reserved is below the burst and stops there;
// the bucket's balance is ⌊c⌋. Time spent full needs no rule of its own: a
// full bucket holds exactly burst − reserved, a whole number, so accrual
// after a spend starts with no fraction.
type model struct {
	rate     *big.Rat // credits per second
	burst    int64
	reserved int64
	c        *big.Rat
	at       time.Duration // the model's time, from the start
	queue    []int64       // waiting Spends, in arrival order
	served   []time.Duration
}

func newModel(rate *big.Rat, burst, initial int64) *model {
	return &model{rate: rate, burst: burst, c: new(big.Rat).SetInt64(initial)}
}

func (m *model) ceiling() *big.Rat { return new(big.Rat).SetInt64(m.burst - m.reserved) }

func floorOf(x *big.Rat) int64 { return new(big.Int).Quo(x.Num(), x.Denom()).Int64() }

// accrue moves c forward to the model time to, with no one served.
func (m *model) accrue(to time.Duration) {
	if to <= m.at {
		return
	}
	if m.c.Cmp(m.ceiling()) < 0 {
		m.c.Add(m.c, new(big.Rat).Mul(m.rate, big.NewRat(int64(to-m.at), int64(time.Second))))
		if m.c.Cmp(m.ceiling()) > 0 {
			m.c = m.ceiling()
		}
	}
	m.at = to
}

// serve takes credit for the waiters at the front, in order, while it is
// there.
func (m *model) serve() {
	for len(m.queue) > 0 && floorOf(m.c) >= m.queue[0] {
		m.c.Sub(m.c, new(big.Rat).SetInt64(m.queue[0]))
		m.queue = m.queue[1:]
		m.served = append(m.served, m.at)
	}
}

// advance moves the model to time to, serving each waiter at the exact
// moment its credit accrued, and recording it as served at the whole
// nanosecond at or after that moment, when it returns. The accrual from
// the exact moment to the whole nanosecond belongs to the bucket: serving
// at the whole nanosecond instead would cap a bucket that the credit
// filled, dropping the fraction.
func (m *model) advance(to time.Duration) {
	for len(m.queue) > 0 && m.rate.Sign() > 0 {
		n := m.queue[0]
		if floorOf(m.c) >= n { // there already: served now
			m.serve()
			continue
		}
		need := new(big.Rat).Sub(new(big.Rat).SetInt64(n), m.c)
		if new(big.Rat).SetInt64(n).Cmp(m.ceiling()) > 0 {
			break // accrual alone cannot serve it
		}
		// exact = need / rate · 10^9 ns from now; when = ⌈exact⌉.
		exact := new(big.Rat).Quo(need, m.rate)
		exact.Mul(exact, big.NewRat(int64(time.Second), 1))
		q, r := new(big.Int).QuoRem(exact.Num(), exact.Denom(), new(big.Int))
		if r.Sign() > 0 {
			q.Add(q, big.NewInt(1))
		}
		when := m.at + time.Duration(q.Int64())
		if when > to {
			break
		}
		// At the exact moment the balance is n, no more than the
		// ceiling; the waiter takes it, and accrual runs on from zero to
		// the whole nanosecond.
		after := new(big.Rat).Sub(new(big.Rat).SetInt(q), exact) // in [0, 1) ns
		m.c = after.Mul(after, m.rate)
		m.c.Quo(m.c, big.NewRat(int64(time.Second), 1))
		m.queue = m.queue[1:]
		m.served = append(m.served, when)
		m.at = when
		m.serve()
	}
	m.accrue(to)
}

func (m *model) trySpend(n int64) bool {
	if n == 0 {
		return true
	}
	if len(m.queue) > 0 || floorOf(m.c) < n {
		return false
	}
	m.c.Sub(m.c, new(big.Rat).SetInt64(n))
	return true
}

func (m *model) tryAcquire(n int64) bool {
	if !m.trySpend(n) {
		return false
	}
	m.reserved += n
	return true
}

func (m *model) release(n int64) {
	m.reserved -= n
	m.c.Add(m.c, new(big.Rat).SetInt64(n))
	m.serve()
}

func (m *model) forget(n int64) { m.reserved -= n }

// setRate changes the rate, carrying the fraction of a credit over as the
// bucket documents: as the time the new rate takes to accrue it, rounded
// down to the nanosecond.
func (m *model) setRate(r *big.Rat) {
	if m.c.Cmp(m.ceiling()) < 0 {
		whole := new(big.Rat).SetInt64(floorOf(m.c))
		frac := new(big.Rat).Sub(m.c, whole)
		m.c = whole
		if r.Sign() > 0 && m.rate.Sign() > 0 {
			ns := new(big.Rat).Quo(frac, r)
			ns.Mul(ns, big.NewRat(int64(time.Second), 1))
			t := new(big.Int).Quo(ns.Num(), ns.Denom())
			m.c.Add(m.c, new(big.Rat).Mul(r, new(big.Rat).SetFrac(t, big.NewInt(int64(time.Second)))))
		}
	}
	m.rate = r
	m.serve()
}

// Random operations, one at a time at random moments (often several at one
// moment), against the model: every outcome, every balance and the moment
// every waiter is served must match it exactly.
func TestRandomOpsMatchTheContinuousModel(t *testing.T) {
	rates := []string{"7.3", "3", "1/3", "1000", "10/13"}
	for seed := range uint64(40) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runModelOps(t, seed, rates) })
		})
	}
}

func runModelOps(t *testing.T, seed uint64, rates []string) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	rate := ratOf(t, rates[rng.IntN(len(rates))])
	burst := 1 + rng.Int64N(20)
	initial := rng.Int64N(burst + 1)
	b := mustNew(t, floatOf(rate), burst, credit.WithInitial(initial))
	m := newModel(rate, burst, initial)
	start := time.Now()

	var held []*token.Token
	var mu sync.Mutex
	var served []time.Duration // moments the waiters returned, in order
	var wg sync.WaitGroup
	for step := range 300 {
		var pause time.Duration
		switch rng.IntN(4) {
		case 0: // the same moment
		case 1:
			pause = time.Duration(rng.Int64N(int64(2 * time.Second)))
		default:
			pause = time.Duration(rng.Int64N(int64(200 * time.Millisecond)))
		}
		time.Sleep(pause)
		synctest.Wait()
		now := time.Since(start)
		m.advance(now)
		what := ""
		switch op := rng.IntN(10); {
		case op < 3:
			n := rng.Int64N(burst + 1)
			what = fmt.Sprintf("TrySpend(%d)", n)
			require.Equal(t, m.trySpend(n), b.TrySpend(n), "step %d at %v: %s", step, now, what)
		case op < 5:
			n := 1 + rng.Int64N(burst)
			what = fmt.Sprintf("TryAcquire(%d)", n)
			tok, ok := b.TryAcquire(n)
			require.Equal(t, m.tryAcquire(n), ok, "step %d at %v: %s", step, now, what)
			if ok {
				held = append(held, &tok)
			}
		case op < 7 && len(held) > 0:
			i := rng.IntN(len(held))
			tok := held[i]
			held = append(held[:i], held[i+1:]...)
			k := rng.Int64N(tok.Permits() + 1)
			what = fmt.Sprintf("settle %d: forget %d, release the rest", tok.Permits(), k)
			part, ok := tok.Split(k)
			require.True(t, ok)
			n := tok.Permits()
			part.Forget()
			m.forget(k)
			tok.Release()
			m.release(n)
		case op < 8 && len(m.queue) < 4:
			n := 1 + rng.Int64N(burst)
			what = fmt.Sprintf("Spend(%d)", n)
			m.queue = append(m.queue, n)
			m.serve()
			wg.Go(func() {
				if err := b.Spend(context.Background(), n); err != nil {
					panic(err)
				}
				mu.Lock()
				served = append(served, time.Since(start))
				mu.Unlock()
			})
		case op < 9:
			r := ratOf(t, rates[rng.IntN(len(rates))])
			if rng.IntN(5) == 0 {
				r = new(big.Rat)
			}
			what = "SetRate(" + r.RatString() + ")"
			require.NoError(t, b.SetRate(floatOf(r)))
			m.setRate(r)
		}
		synctest.Wait()
		st := b.Stats()
		mu.Lock()
		got := append([]time.Duration(nil), served...)
		mu.Unlock()
		require.Equal(t, m.served, got, "step %d at %v after %s: waiters served at", step, now, what)
		require.Equal(t, floorOf(m.c), st.Balance, "step %d at %v after %s: balance", step, now, what)
		require.Equal(t, m.reserved, st.Reserved, "step %d at %v after %s: reserved", step, now, what)
		require.Equal(t, len(m.queue), st.Waiters, "step %d at %v after %s: waiters", step, now, what)
	}
	// Settle everything and let the waiters finish.
	for _, tok := range held {
		n := tok.Permits()
		tok.Release()
		m.release(n)
	}
	require.NoError(t, b.SetRate(1000))
	m.setRate(big.NewRat(1000, 1))
	wg.Wait()
}

// Many goroutines at one moment: the credit taken never exceeds what the
// model holds (no over-credit under contention), and once they are done
// the bucket holds exactly the model's balance less what they took.
func TestConcurrentSpendsNeverOverCredit(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 0xc0c0))
				rate := ratOf(t, "7.3")
				burst := 2 + rng.Int64N(30)
				b := mustNew(t, floatOf(rate), burst, credit.WithInitial(rng.Int64N(burst+1)))
				m := newModel(rate, burst, b.Stats().Balance)
				start := time.Now()
				for range 50 {
					time.Sleep(time.Duration(rng.Int64N(int64(time.Second))))
					now := time.Since(start)
					m.advance(now)
					var took atomic.Int64
					var wg sync.WaitGroup
					for range 2 + rng.IntN(8) {
						n := 1 + rng.Int64N(3)
						reserve := rng.IntN(3) == 0
						wg.Go(func() {
							if reserve {
								if tok, ok := b.TryAcquire(n); ok {
									took.Add(n)
									tok.Forget()
								}
								return
							}
							if b.TrySpend(n) {
								took.Add(n)
							}
						})
					}
					wg.Wait()
					require.LessOrEqual(t, took.Load(), floorOf(m.c), "at %v: over-credit", now)
					require.True(t, m.trySpend(took.Load()))
					require.Equal(t, floorOf(m.c), b.Stats().Balance, "at %v", now)
				}
			})
		})
	}
}
