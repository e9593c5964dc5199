package overload

import (
	"testing"
)

// wordModel is a word decoded into plain numbers: the reference the
// transitions are checked against.
type wordModel struct {
	held   []int64
	limit  int64
	blocks word
}

func (m wordModel) total() int64 {
	var t int64
	for _, h := range m.held {
		t += h
	}
	return t
}

// FuzzWordTransitions builds words of every layout from plain numbers and
// checks each transition against arithmetic on the numbers: the decoders
// (the total gathered by one multiplication included), admit, grant,
// release, forget and the limit and block-bit replacements, each of which
// must keep every field it does not own and refuse, changing nothing, what
// would break W1–W3.
func FuzzWordTransitions(f *testing.F) {
	f.Add(uint8(4), uint16(4095), uint16(0), uint16(0), uint16(0), uint16(4095), uint8(0), uint8(3), uint16(1), uint16(4095))
	f.Add(uint8(1), uint16(7), uint16(0), uint16(0), uint16(0), uint16(9), uint8(1), uint8(0), uint16(2), uint16(1000))
	f.Add(uint8(2), uint16(300), uint16(400), uint16(0), uint16(0), uint16(1000), uint8(2), uint8(1), uint16(301), uint16(30000))
	f.Add(uint8(3), uint16(1), uint16(2), uint16(3), uint16(0), uint16(7), uint8(15), uint8(2), uint16(1), uint16(32768))
	f.Fuzz(func(t *testing.T, kb uint8, h0, h1, h2, h3, lim uint16, bl, cb uint8, nb, ms uint16) {
		k := 1 + int(kb)%MaxClasses
		l := newLayout(k)
		max := l.maxPermits()
		m := wordModel{held: make([]int64, k)}
		left := max
		for c, h := range []uint16{h0, h1, h2, h3}[:k] {
			m.held[c] = min(int64(h), left)
			left -= m.held[c]
		}
		m.limit = int64(lim) % (max + 1)
		m.blocks = word(bl & (1<<k - 1))
		w := l.pack(m.limit, m.held).withBlocks(m.blocks)
		check := func(what string, w word, m wordModel) {
			t.Helper()
			if got := l.held(w); got != m.total() {
				t.Fatalf("%s: held %d, want %d (k %d, %v)", what, got, m.total(), k, m)
			}
			if got := l.limit(w); got != m.limit {
				t.Fatalf("%s: limit %d, want %d", what, got, m.limit)
			}
			for c := range k {
				if got := l.classHeld(w, c); got != m.held[c] {
					t.Fatalf("%s: class %d holds %d, want %d", what, c, got, m.held[c])
				}
			}
			if w.blocks() != m.blocks {
				t.Fatalf("%s: blocks %x, want %x", what, w.blocks(), m.blocks)
			}
			if s := l.checkInvariants(w, max); s != "" {
				t.Fatalf("%s: %s", what, s)
			}
		}
		check("pack", w, m)

		c := int(cb) % k
		n := int64(nb) % (max + 1)
		cc := classConfig{maxShare: (int64(ms) + 1) << 16, unit: l.unit(c), block: blockBit(c)}
		ceiling := cc.ceilingAt(m.limit)
		if want := (cc.maxShare*m.limit + shareOne - 1) / shareOne; ceiling != want {
			t.Fatalf("ceilingAt(%d) = %d, want ⌈%d·%d/2^32⌉ = %d", m.limit, ceiling, cc.maxShare, m.limit, want)
		}

		// admit and grant.
		fits := m.total()+n <= m.limit && m.held[c]+n <= ceiling
		got, ok := l.grant(w, c, n, ceiling)
		if ok != fits {
			t.Fatalf("grant(%d, %d) = %v, want %v (%v, ceiling %d)", c, n, ok, fits, m, ceiling)
		}
		after := m
		after.held = append([]int64(nil), m.held...)
		if ok {
			after.held[c] += n
			check("grant", got, after)
		} else if got != w {
			t.Fatal("a refused grant changed the word")
		}
		got, ok = l.admit(w, c, n, ceiling)
		if want := fits && w&blockBit(c) == 0; ok != want {
			t.Fatalf("admit(%d, %d) = %v, want %v", c, n, ok, want)
		}
		if !ok && got != w {
			t.Fatal("a refused admit changed the word")
		}

		// release and forget.
		got, ok = l.release(w, c, n)
		if ok != (n <= m.held[c]) {
			t.Fatalf("release(%d, %d) = %v with %d held", c, n, ok, m.held[c])
		}
		if ok {
			after := m
			after.held = append([]int64(nil), m.held...)
			after.held[c] -= n
			check("release", got, after)
			got, _ = l.forget(w, c, n)
			after.limit = max64(m.limit-n, 0)
			check("forget", got, after)
		} else if got != w {
			t.Fatal("a refused release changed the word")
		}

		// The limit and the block bits are replaced alone.
		newLimit := int64(nb) % (max + 1)
		after = m
		after.limit = newLimit
		check("withLimit", l.withLimit(w, newLimit), after)
		after = m
		after.blocks = allBlocks &^ m.blocks
		check("withBlocks", w.withBlocks(after.blocks), after)
	})
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// TestLayoutWidths pins the widths the package documentation and the
// word's diagram state.
func TestLayoutWidths(t *testing.T) {
	for k, want := range map[int]int64{1: 1<<30 - 1, 2: 1<<20 - 1, 3: 1<<15 - 1, 4: 1<<12 - 1} {
		if got := MaxPermits(k); got != want {
			t.Errorf("MaxPermits(%d) = %d, want %d", k, got, want)
		}
		l := newLayout(k)
		if l.shift(0) < MaxClasses || l.shift(k-1)+l.width > l.top || l.top+l.width != 64 {
			t.Errorf("k %d: the fields overlap the block bits, each other or the limit", k)
		}
	}
	if MaxPermits(0) != 0 || MaxPermits(MaxClasses+1) != 0 {
		t.Error("MaxPermits outside [1, MaxClasses] is not 0")
	}
}
