package keyed_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/keyed"
	"github.com/atomicsem/atomicsem/token"
)

// semModel is the unbounded reference for Semaphores: every key it has
// seen keeps its own record for ever.
type semModel struct {
	shared, max int64
	keys        map[string]*semKeyModel
}

type semKeyModel struct {
	held, limit int64
	own         bool
}

func (m *semModel) key(k string) *semKeyModel {
	if km, ok := m.keys[k]; ok {
		return km
	}
	km := &semKeyModel{limit: m.shared}
	m.keys[k] = km
	return km
}

// inUse counts the keys that a table may not drop: those that differ from
// a new key.
func (m *semModel) inUse() int {
	n := 0
	for _, km := range m.keys {
		if km.held != 0 || km.own || km.limit != m.shared {
			n++
		}
	}
	return n
}

type heldToken struct {
	key string
	tok *token.Token
}

// TestSemaphoresDroppingChangesNoAnswer drives a Semaphores table with a
// small cap and the unbounded model with the same random operations, and
// compares every answer and every key's Stats. The table drops keys as it
// inserts and on Sweep; the model never does. A new key the table refuses
// must find it full of keys the model says are in use.
func TestSemaphoresDroppingChangesNoAnswer(t *testing.T) {
	const maxKeys = 6
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 48))
		s, err := keyed.NewSemaphores(2, keyed.WithMaxLimit(4), keyed.WithMaxKeys(maxKeys))
		require.NoError(t, err)
		m := &semModel{shared: 2, max: 4, keys: map[string]*semKeyModel{}}
		var held []heldToken
		for step := range 200 {
			k := keys[r.IntN(len(keys))]
			where := fmt.Sprintf("seed %d step %d key %s", seed, step, k)
			switch op := r.IntN(10); {
			case op < 4:
				n := r.Int64N(4)
				km := m.key(k)
				want := n == 0 || n <= km.limit-km.held // atomicsem grants 0 even below the limit
				_, present := s.KeyStats(k)
				full := s.Len() == maxKeys
				tok, ok := s.TryAcquire(k, n)
				if !ok && want {
					require.False(t, present, "%s: TryAcquire(%d) refused on a key present", where, n)
					require.True(t, full, "%s: new key refused below the cap", where)
					require.GreaterOrEqual(t, m.inUse(), maxKeys, "%s: refused while a key could go", where)
					continue
				}
				require.Equal(t, want, ok, "%s: TryAcquire(%d)", where, n)
				if ok {
					km.held += n
					held = append(held, heldToken{k, &tok})
				}
			case op < 7 && len(held) > 0:
				i := r.IntN(len(held))
				h := held[i]
				held = append(held[:i], held[i+1:]...)
				km := m.keys[h.key]
				n := h.tok.Permits()
				km.held -= n
				if op == 6 {
					h.tok.Forget()
					km.limit = max(km.limit-n, 0)
				} else {
					h.tok.Release()
				}
			case op == 7:
				l := r.Int64N(5)
				require.NoError(t, s.SetLimit(l), where)
				m.shared = l
				for _, km := range m.keys {
					if !km.own {
						km.limit = l
					}
				}
			case op == 8:
				if r.IntN(2) == 0 {
					l := r.Int64N(5)
					_, present := s.KeyStats(k)
					if err := s.SetKeyLimit(k, l); err != nil {
						require.ErrorIs(t, err, keyed.ErrTooManyKeys, where)
						require.False(t, present, where)
						require.GreaterOrEqual(t, m.inUse(), maxKeys, where)
						continue
					}
					km := m.key(k)
					km.own, km.limit = true, l
				} else {
					s.ResetKeyLimit(k)
					if km, ok := m.keys[k]; ok && km.own {
						km.own, km.limit = false, m.shared
					}
				}
			default:
				s.Sweep()
			}
			require.LessOrEqual(t, s.Len(), maxKeys, where)
			for _, k := range keys {
				st, _ := s.KeyStats(k)
				km := m.key(k)
				require.Equal(t, km.held, st.Held, "%s: Held of %s", where, k)
				require.Equal(t, km.limit, st.Limit, "%s: Limit of %s", where, k)
			}
		}
		for i := range held {
			held[i].tok.Release()
		}
	}
}
