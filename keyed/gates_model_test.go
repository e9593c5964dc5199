package keyed_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/keyed"
	"github.com/atomicsem/atomicsem/overload"
	"github.com/atomicsem/atomicsem/token"
)

// gatesRef is the unbounded reference for Gates: a gate of the same
// configuration per key, kept for ever.
type gatesRef struct {
	shared, max int64
	classes     []overload.Class
	opts        []overload.Option
	gates       map[string]*overload.Gate
	own         map[string]bool
}

func (m *gatesRef) gate(k string) *overload.Gate {
	if g, ok := m.gates[k]; ok {
		return g
	}
	g := overload.MustNew(m.shared, m.max, m.classes, m.opts...)
	m.gates[k] = g
	return g
}

// inUse counts the keys that a table may not drop: those whose gate
// differs from a new one.
func (m *gatesRef) inUse() int {
	n := 0
	for k, g := range m.gates {
		if m.own[k] || g.Limit() != m.shared || !g.Idle() {
			n++
		}
	}
	return n
}

// gatesCall is one Acquire made on the table and on the reference with
// the same context.
type gatesCall struct {
	key        string
	cancel     context.CancelFunc
	tDone      chan struct{}
	rDone      chan struct{}
	tTok, rTok token.Token
	tErr, rErr error
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// gateErrs are the errors a gate's Acquire returns; sameGateErr reports
// whether two errors match the same ones.
var gateErrs = []error{
	overload.ErrInvalidPermits, overload.ErrExceedsMax, overload.ErrQueueFull, overload.ErrMaxWait,
	overload.ErrDropped, overload.ErrDeadline, context.Canceled, context.DeadlineExceeded,
}

func sameGateErr(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	for _, e := range gateErrs {
		if errors.Is(a, e) != errors.Is(b, e) {
			return false
		}
	}
	return true
}

// gatesConfigs are the configurations the model test runs, the queue
// discipline's time-kept state (the overload mode, the estimate of the
// wait, the starvation bound) included.
var gatesConfigs = []struct {
	classes []overload.Class
	opts    []overload.Option
}{
	{[]overload.Class{{Name: "hi", Share: 0.5}, {Name: "lo"}}, nil},
	{[]overload.Class{{Name: "a", Share: 0.25}, {Name: "b", Share: 0.25, MaxShare: 0.5}, {Name: "c"}},
		[]overload.Option{overload.WithMaxQueue(2), overload.WithMaxWait(3 * time.Millisecond)}},
	{[]overload.Class{{Name: "hi"}, {Name: "lo"}},
		[]overload.Option{overload.WithCoDel(time.Millisecond, 4*time.Millisecond), overload.WithStarvationBound(6 * time.Millisecond)}},
	{[]overload.Class{{Name: "hi", Share: 0.5}, {Name: "mid"}, {Name: "lo"}},
		[]overload.Option{overload.WithCoDel(time.Millisecond, 4*time.Millisecond), overload.WithMaxQueue(3)}},
}

// TestGatesDroppingChangesNoAnswer drives a Gates table with a small cap
// and the unbounded reference with the same random operations (Acquire
// with and without deadlines, TryAcquire, releases, Forget, cancellations,
// limit changes, time passing, Sweep) in a testing/synctest bubble, and
// compares every answer and every key's Stats. The table drops gates as it
// inserts and on Sweep; the reference never does. A new key the table
// refuses must find it full of keys whose reference gate is in use.
//
// Before each step both sides look at every key's gate (Gate.Idle), as the
// table itself does at the cap and on Sweep, so that the table's own looks
// in between change nothing the comparison sees.
func TestGatesDroppingChangesNoAnswer(t *testing.T) {
	const maxKeys = 4
	keys := []string{"a", "b", "c", "d", "e", "f", "g"}
	for seed := range uint64(24) {
		cfg := gatesConfigs[seed%uint64(len(gatesConfigs))]
		synctest.Test(t, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 60))
			s, err := keyed.NewGates(2, cfg.classes, keyed.WithMaxLimit(4), keyed.WithMaxKeys(maxKeys), keyed.WithGateOptions(cfg.opts...))
			require.NoError(t, err)
			m := &gatesRef{shared: 2, max: 4, classes: cfg.classes, opts: cfg.opts,
				gates: map[string]*overload.Gate{}, own: map[string]bool{}}
			k := len(cfg.classes)
			var calls, all []*gatesCall
			defer func() { // on a failure too, so that no waiter outlives the bubble
				for _, call := range all {
					call.cancel()
				}
				synctest.Wait()
			}()
			type pair struct{ t, r *token.Token }
			var held []pair
			look := func() {
				for _, key := range keys {
					if g, ok := keyed.GateOf(s, key); ok {
						g.Idle()
					}
					if g, ok := m.gates[key]; ok {
						g.Idle()
					}
				}
			}
			refused := func(where, key string, present, full bool) {
				require.False(t, present, "%s: refused a key present", where)
				require.True(t, full, "%s: refused a new key below the cap", where)
				require.GreaterOrEqual(t, m.inUse(), maxKeys, "%s: refused while a key could go", where)
			}
			for step := range 250 {
				// Each step begins a nanosecond after the last, and every
				// deadline ends 333 ns off a whole microsecond, so that no
				// two timers of a gate fire at one instant, in an order
				// that could differ between the two sides.
				time.Sleep(time.Nanosecond)
				look()
				key := keys[r.IntN(len(keys))]
				where := fmt.Sprintf("seed %d step %d key %s", seed, step, key)
				_, present := s.KeyStats(key)
				full := s.Len() == maxKeys
				switch op := r.IntN(16); {
				case op < 5:
					c, n := r.IntN(k), 1+r.Int64N(2)
					ctx, cancel := context.WithCancel(context.Background())
					if r.IntN(3) == 0 {
						ctx, cancel = context.WithTimeout(context.Background(), time.Duration(1+r.IntN(4))*time.Millisecond+333*time.Nanosecond)
					}
					call := &gatesCall{key: key, cancel: cancel, tDone: make(chan struct{}), rDone: make(chan struct{})}
					go func() {
						defer close(call.tDone)
						call.tTok, call.tErr = s.Acquire(ctx, key, c, n)
					}()
					synctest.Wait()
					if closed(call.tDone) && errors.Is(call.tErr, keyed.ErrTooManyKeys) {
						refused(where, key, present, full)
						cancel()
						continue
					}
					g := m.gate(key)
					go func() {
						defer close(call.rDone)
						call.rTok, call.rErr = g.Acquire(ctx, c, n)
					}()
					calls = append(calls, call)
					all = append(all, call)
				case op < 7:
					c, n := r.IntN(k), r.Int64N(3)
					want := m.gate(key)
					tTok, ok := s.TryAcquire(key, c, n)
					rTok, rok := want.TryAcquire(c, n)
					if !ok && rok {
						rTok.Release()
						refused(where, key, present, full)
						continue
					}
					require.Equal(t, rok, ok, "%s: TryAcquire(%d, %d)", where, c, n)
					if ok {
						held = append(held, pair{&tTok, &rTok})
					}
				case op < 10 && len(held) > 0:
					i := r.IntN(len(held))
					h := held[i]
					held = append(held[:i], held[i+1:]...)
					if op == 9 && r.IntN(3) == 0 {
						h.t.Forget()
						h.r.Forget()
					} else {
						h.t.Release()
						h.r.Release()
					}
				case op == 10 && len(calls) > 0:
					calls[r.IntN(len(calls))].cancel()
				case op == 11:
					l := r.Int64N(5)
					require.NoError(t, s.SetLimit(l), where)
					m.shared = l
					for key, g := range m.gates {
						if !m.own[key] {
							require.NoError(t, g.SetLimit(l))
						}
					}
				case op == 12:
					if r.IntN(2) == 0 {
						l := r.Int64N(5)
						if err := s.SetKeyLimit(key, l); err != nil {
							require.ErrorIs(t, err, keyed.ErrTooManyKeys, where)
							refused(where, key, present, full)
							continue
						}
						require.NoError(t, m.gate(key).SetLimit(l))
						m.own[key] = true
					} else {
						s.ResetKeyLimit(key)
						if m.own[key] {
							m.own[key] = false
							require.NoError(t, m.gate(key).SetLimit(m.shared))
						}
					}
				case op == 13:
					s.Sweep()
				case op == 14 && r.IntN(8) == 0:
					time.Sleep(overload.EstimateMemory) // the estimate of the wait runs out
				default:
					time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
				}
				synctest.Wait()
				// Every call is decided alike on both sides.
				live := calls[:0]
				for _, call := range calls {
					td, rd := closed(call.tDone), closed(call.rDone)
					require.Equal(t, rd, td, "%s: call on %s decided by one side only (table %v, reference %v)", where, call.key, call.tErr, call.rErr)
					if !td {
						live = append(live, call)
						continue
					}
					require.True(t, sameGateErr(call.tErr, call.rErr), "%s: call on %s: table %v, reference %v", where, call.key, call.tErr, call.rErr)
					if call.tErr == nil {
						held = append(held, pair{&call.tTok, &call.rTok})
					}
					call.cancel()
				}
				calls = live
				require.LessOrEqual(t, s.Len(), maxKeys, where)
				require.NoError(t, keyed.CheckGatesIndex(s), where)
				look()
				for _, key := range keys {
					got, _ := s.KeyStats(key)
					want := m.gate(key).Stats()
					require.Equal(t, want.Limit, got.Limit, "%s: Limit of %s", where, key)
					require.Equal(t, want.Held, got.Held, "%s: Held of %s", where, key)
					require.Equal(t, want.Waiters, got.Waiters, "%s: Waiters of %s", where, key)
					for c := range want.Classes {
						w, g := want.Classes[c], got.Classes[c]
						require.Equal(t, [3]any{w.Held, w.Waiters, w.Overloaded}, [3]any{g.Held, g.Waiters, g.Overloaded},
							"%s: class %d of %s", where, c, key)
					}
				}
			}
			for _, call := range calls {
				call.cancel()
			}
			synctest.Wait()
			for _, call := range calls {
				if call.tErr == nil {
					call.tTok.Release()
				}
				if call.rErr == nil {
					call.rTok.Release()
				}
			}
			for _, h := range held {
				h.t.Release()
				h.r.Release()
			}
		})
	}
}
