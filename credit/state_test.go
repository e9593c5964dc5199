package credit_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/credit"
)

// The zero State is a full bucket with nothing reserved under every
// configuration, at every moment its clock can read.
func TestZeroStateIsFull(t *testing.T) {
	for _, tt := range []struct {
		rate  float64
		burst int64
	}{{10, 100}, {7.3, 3}, {0, 5}, {math.Inf(1), 7}, {1.0 / 3600, 1000}, {1, atomicsem.MaxPermits}, {1e9, 1}} {
		t.Run(fmt.Sprintf("rate=%v/burst=%d", tt.rate, tt.burst), func(t *testing.T) {
			c := credit.MustConfig(tt.rate, tt.burst)
			now := c.Now()
			var s credit.State
			require.Equal(t, tt.burst, s.Balance(c, now))
			require.True(t, s.Full(c, now))
			require.True(t, s.TrySpend(c, now, tt.burst))
			if !math.IsInf(tt.rate, 1) { // an unlimited bucket is full again at once
				require.False(t, s.Full(c, now))
				require.Zero(t, s.Balance(c, now))
			}
		})
	}
}

// Random operations at random moments against the continuous model in
// exact rationals (model_test.go): every outcome and every balance match,
// and Wait tells the exact nanosecond at which accrual covers a request.
func TestStateMatchesTheContinuousModel(t *testing.T) {
	rates := []string{"7.3", "3", "1/3", "1000", "10/13", "1000000007"}
	for seed := range uint64(60) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x57a7e))
			rate := ratOf(t, rates[rng.IntN(len(rates))])
			burst := 1 + rng.Int64N(20)
			c := credit.MustConfig(floatOf(rate), burst)
			var s credit.State
			m := newModel(rate, burst, burst)
			base := c.Now()
			var at time.Duration
			for step := range 400 {
				switch rng.IntN(3) {
				case 0:
				case 1:
					at += time.Duration(rng.Int64N(int64(2 * time.Second)))
				default:
					at += time.Duration(rng.Int64N(int64(200 * time.Millisecond)))
				}
				now := base + int64(at)
				m.advance(at)
				n := rng.Int64N(burst + 1)
				var what string
				switch op := rng.IntN(10); {
				case op < 4:
					what = fmt.Sprintf("TrySpend(%d)", n)
					require.Equal(t, m.trySpend(n), s.TrySpend(c, now, n), "step %d at %v: %s", step, at, what)
				case op < 6:
					what = fmt.Sprintf("TryReserve(%d)", n)
					require.Equal(t, m.tryAcquire(n), s.TryReserve(c, now, n), "step %d at %v: %s", step, at, what)
				case op < 7 && m.reserved > 0:
					k := rng.Int64N(m.reserved + 1)
					what = fmt.Sprintf("Release(%d)", k)
					s.Release(c, now, k)
					m.release(k)
				case op < 8 && m.reserved > 0:
					k := rng.Int64N(m.reserved + 1)
					what = fmt.Sprintf("Forget(%d)", k)
					s.Forget(c, now, k)
					m.forget(k)
				case op < 9:
					what = fmt.Sprintf("Wait(%d)", n)
					w, ok := s.Wait(c, now, n)
					if n > burst-m.reserved {
						require.False(t, ok, "step %d at %v: %s", step, at, what)
						break
					}
					require.True(t, ok, "step %d at %v: %s", step, at, what)
					probe := *m
					probe.c = new(big.Rat).Set(m.c)
					probe.queue = []int64{n}
					probe.served = nil
					probe.advance(at + w)
					require.Equal(t, []time.Duration{at + w}, probe.served, "step %d at %v: %s = %v", step, at, what, w)
				default:
					r := ratOf(t, rates[rng.IntN(len(rates))])
					what = "Rerate(" + r.RatString() + ")"
					next, err := c.WithRate(floatOf(r))
					require.NoError(t, err)
					s.Rerate(c, next, now)
					c = next
					m.setRate(r)
				}
				require.Equal(t, floorOf(m.c), s.Balance(c, now), "step %d at %v after %s: balance", step, at, what)
				require.Equal(t, m.reserved, s.Reserved(), "step %d at %v after %s: reserved", step, at, what)
				require.Equal(t, m.reserved == 0 && floorOf(m.c) == burst, s.Full(c, now), "step %d at %v after %s: full", step, at, what)
			}
		})
	}
}

// A stream of spends that always waits takes one credit a period however
// late each waiter wakes, as long as it wakes before the next credit is
// due: TrySpendSince takes the credit at the moment it accrued. TrySpend
// at the moment of waking, by contrast, loses the lateness every time when
// the burst is 1.
func TestLateWakersKeepTheRate(t *testing.T) {
	c := credit.MustConfig(10_000, 1)
	const period = 100 * time.Microsecond
	rng := rand.New(rand.NewPCG(1, 2))
	var since, naive credit.State
	base := c.Now()
	for _, s := range []*credit.State{&since, &naive} {
		require.True(t, s.TrySpend(c, base, 1))
	}
	now, nowNaive := base, base
	const spends = 10_000
	for range spends {
		late := time.Duration(rng.Int64N(int64(period)))
		w, ok := since.Wait(c, now, 1)
		require.True(t, ok)
		wake := now + int64(w+late)
		require.True(t, since.TrySpendSince(c, now, wake, 1))
		now = wake

		w, ok = naive.Wait(c, nowNaive, 1)
		require.True(t, ok)
		nowNaive += int64(w + late)
		require.True(t, naive.TrySpend(c, nowNaive, 1))
	}
	// The waiting stream's last credit accrued exactly spends periods on.
	require.Zero(t, since.Balance(c, base+spends*int64(period)))
	require.Equal(t, int64(1), since.Balance(c, base+(spends+1)*int64(period)))
	require.Greater(t, nowNaive-base, int64(spends*period*5/4), "the naive stream should lose about half a period a credit")
}

// Settling more reserved credit than is held panics in the package's voice
// and changes nothing.
func TestStateSettlingMoreThanReservedPanics(t *testing.T) {
	c := credit.MustConfig(10, 5)
	now := c.Now()
	var s credit.State
	require.True(t, s.TryReserve(c, now, 2))
	before := s
	require.PanicsWithValue(t, "credit: State.Release of 3 credits with 2 reserved", func() { s.Release(c, now, 3) })
	require.PanicsWithValue(t, "credit: State.Forget of -1 credits with 2 reserved", func() { s.Forget(c, now, -1) })
	require.Equal(t, before, s)
}

// FuzzStateAgainstTheModel drives a State and the continuous model with the
// same operations, decoded from the input, at moments it chooses: every
// outcome, balance and reserved count must match. Its seeds run with the
// tests; go test -fuzz FuzzStateAgainstTheModel ./credit searches further.
func FuzzStateAgainstTheModel(f *testing.F) {
	f.Add([]byte{0, 7, 1, 3, 2, 9, 3, 1, 4, 250, 5, 2, 6, 1})
	f.Add([]byte{1, 1, 1, 1, 0, 255, 0, 255, 2, 2, 2, 2, 7, 3, 7, 0})
	f.Add([]byte{3, 0, 6, 5, 5, 5, 4, 4, 0, 200, 1, 100, 2, 50})
	rates := []string{"7.3", "3", "1/3", "1000", "10/13", "1000000007", "1"}
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) < 2 {
			return
		}
		rate := ratOf(t, rates[int(ops[0])%len(rates)])
		burst := 1 + int64(ops[1]%16)
		c := credit.MustConfig(floatOf(rate), burst)
		var s credit.State
		m := newModel(rate, burst, burst)
		base := c.Now()
		var at time.Duration
		for i := 2; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%8, int64(ops[i+1])
			now := base + int64(at)
			m.advance(at)
			switch op {
			case 0: // time passes: arg² ms, up to about a minute
				at += time.Duration(arg*arg) * time.Millisecond
				continue
			case 1:
				n := arg % (burst + 2)
				require.Equal(t, m.trySpend(n), s.TrySpend(c, now, n), "op %d: TrySpend(%d)", i, n)
			case 2:
				n := arg % (burst + 2)
				require.Equal(t, m.tryAcquire(n), s.TryReserve(c, now, n), "op %d: TryReserve(%d)", i, n)
			case 3:
				k := arg % (m.reserved + 1)
				s.Release(c, now, k)
				m.release(k)
			case 4:
				k := arg % (m.reserved + 1)
				s.Forget(c, now, k)
				m.forget(k)
			case 5:
				at += time.Duration(arg) * 7919 // a few hundred µs, in odd nanoseconds
				continue
			case 6:
				r := ratOf(t, rates[int(arg)%len(rates)])
				next, err := c.WithRate(floatOf(r))
				require.NoError(t, err)
				s.Rerate(c, next, now)
				c = next
				m.setRate(r)
			case 7:
				n := arg % (burst + 1)
				if w, ok := s.Wait(c, now, n); ok {
					early, onTime := s, s
					require.True(t, onTime.TrySpend(c, now+int64(w), n), "op %d: Wait(%d) = %v is early", i, n, w)
					require.False(t, w > 0 && early.TrySpend(c, now+int64(w)-1, n), "op %d: Wait(%d) = %v is late", i, n, w)
				}
			}
			require.Equal(t, floorOf(m.c), s.Balance(c, now), "op %d at %v: balance", i, at)
			require.Equal(t, m.reserved, s.Reserved(), "op %d at %v: reserved", i, at)
		}
	})
}
