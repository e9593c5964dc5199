package keyed_test

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/keyed"
)

// indexOps applies ops to a shard's index and to a map, each op a byte:
// the top two bits choose put, delete, get or (for a key's byte with
// its next bit set) a swap of two places or a compaction, the rest the
// key of keys. It fails at the first answer or invariant where the two
// part.
func indexOps(t *testing.T, x *keyed.Index, model map[string]int, keys []string, ops []byte) {
	t.Helper()
	for n, op := range ops {
		k := keys[int(op&0x3f)%len(keys)]
		switch op >> 6 {
		case 0, 1:
			x.Put(k, n)
			model[k] = n
		case 2:
			_, want := model[k]
			require.Equal(t, want, x.Delete(k), "op %d: delete %q", n, k)
			delete(model, k)
		case 3:
			if op&0x20 != 0 && x.Len() > 0 {
				if op&0x10 != 0 {
					// Drop the keys whose value has op's low bits.
					m := n % 3
					want := 0
					for k, v := range model {
						if v%3 == m {
							delete(model, k)
							want++
						}
					}
					require.Equal(t, want, x.Compact(func(v int) bool { return v%3 == m }), "op %d: compact", n)
				} else {
					x.Swap(int(op&0x0f)%x.Len(), n%x.Len())
				}
				break
			}
			v, ok := x.Get(k)
			w, want := model[k]
			require.Equal(t, want, ok, "op %d: get %q", n, k)
			require.Equal(t, w, v, "op %d: get %q", n, k)
		}
		if n%16 == 0 {
			require.NoError(t, x.Check(), "op %d", n)
		}
	}
	require.NoError(t, x.Check())
	require.Equal(t, len(model), x.Len())
	for k, w := range model {
		v, ok := x.Get(k)
		require.True(t, ok, k)
		require.Equal(t, w, v, k)
	}
}

// The index answers as a map does through growth from nothing to 30,000
// keys, deletes in every order with the runs they leave, and shrinking
// back to nothing, when the memory it held is all given back.
func TestIndexFollowsAMapAndGivesMemoryBack(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 30_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	x, model := keyed.NewIndex(), map[string]int{}
	for round := range 3 {
		for j, i := range r.Perm(n) {
			x.Put(keys[i], i+round)
			model[keys[i]] = i + round
			if j%7 == 0 {
				x.Swap(r.IntN(x.Len()), r.IntN(x.Len()))
			}
		}
		require.NoError(t, x.Check())
		slots, ents := x.Mem()
		require.LessOrEqual(t, slots, 4*n/3*2, "slots for %d keys", n)
		require.GreaterOrEqual(t, ents, n)
		// Drop a third in one pass, then delete all but a random 1 in
		// 10, checking as the index shrinks.
		m := r.IntN(3)
		dropped := x.Compact(func(v int) bool { return (v-round)%3 == m && (v-round)%10 != round })
		require.NoError(t, x.Check())
		for k, v := range model {
			if (v-round)%3 == m && (v-round)%10 != round {
				delete(model, k)
				dropped--
			}
		}
		require.Zero(t, dropped, "compact dropped as many as the model")
		for j, i := range r.Perm(n) {
			if i%10 == round {
				continue
			}
			if _, ok := model[keys[i]]; !ok {
				continue
			}
			require.True(t, x.Delete(keys[i]))
			delete(model, keys[i])
			if j%997 == 0 {
				require.NoError(t, x.Check())
			}
		}
		require.NoError(t, x.Check())
		for k, w := range model {
			v, ok := x.Get(k)
			require.True(t, ok, k)
			require.Equal(t, w, v, k)
		}
		slots, ents = x.Mem()
		require.LessOrEqual(t, slots, 8*len(model)*2, "slots for %d keys after deletes", len(model))
		require.LessOrEqual(t, ents, 4*len(model)*2, "capacity for %d keys after deletes", len(model))
	}
	for k := range model {
		require.True(t, x.Delete(k))
	}
	slots, ents := x.Mem()
	require.Zero(t, slots, "an empty index keeps no slots")
	require.Zero(t, ents, "an empty index keeps no entries")
	require.Zero(t, x.Len())
}

// FuzzIndex applies a list of puts, deletes and gets on 64 keys to a
// shard's index and to a map, and checks every answer and the index's
// invariants.
func FuzzIndex(f *testing.F) {
	f.Add([]byte{0x00, 0x01, 0x02, 0x81, 0xc1, 0xc0, 0x80, 0x82, 0xc2})
	f.Add([]byte("put every key, delete some, put again: a run of ops"))
	seq := make([]byte, 0, 256)
	for i := range 64 {
		seq = append(seq, byte(i))
	}
	for i := range 64 {
		seq = append(seq, 0x80|byte(i*7%64), 0xc0|byte(i))
	}
	f.Add(seq)
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		indexOps(t, keyed.NewIndex(), map[string]int{}, keys, ops)
	})
}
