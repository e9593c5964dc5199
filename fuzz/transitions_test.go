package fuzz_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/internal/model"
	"github.com/atomicsem/atomicsem/internal/state"
)

// FuzzTransitions applies the pure transitions of internal/state to
// arbitrary words that hold the invariants, a few in a row, and checks each
// against the model: an accepted transition keeps I1–I3, its fields equal the
// model's int64 arithmetic (so nothing wrapped), and it keeps every flag but
// the one it exists to set; a refused transition returns the old word; and
// both agree with the model on whether the operation may happen.
func FuzzTransitions(f *testing.F) {
	for _, seed := range transitionSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &decoder{b: data}
		w := decodeWord(t, d)
		for step := 0; step < 16 && d.more(); step++ {
			w = checkTransition(t, w, d)
		}
	})
}

// flagBits are the word's flags, which no counting transition may touch.
const flagBits = state.QueueFlags | state.ClosedBit

// blocks are the block masks the semaphore passes to Acquire: none (the
// caller has checked the flags under the queue lock), and closed with or
// without the FIFO and barging queue flags.
var blocks = []state.Word{
	0,
	state.ClosedBit,
	state.ClosedBit | state.EligibleBit,
	state.ClosedBit | state.StarvingBit,
}

// decodeWord builds a word that holds I1–I3 from the input, with arbitrary
// flags, and checks that the fields read back as written.
func decodeWord(t *testing.T, d *decoder) state.Word {
	t.Helper()
	maxP := d.upTo(model.MaxPermits)
	total := d.upTo(maxP)
	held := d.upTo(maxP)
	count := total - held
	f := d.next()
	w := state.New(count, total, maxP).WithQueue(f&1 != 0, f&2 != 0, f&4 != 0)
	if f&8 != 0 {
		w |= state.ClosedBit
	}
	flags := w & flagBits
	require.Equal(t, []int64{count, total, maxP}, []int64{w.Count(), w.Total(), w.Max()},
		"New(%d, %d, %d) does not read back", count, total, maxP)
	require.Equal(t, flags, w&flagBits)
	require.Empty(t, w.CheckInvariants(), "word %#x built from valid fields", uint64(w))
	return w
}

// checkTransition applies one transition chosen by the input to old and
// returns the word that results.
func checkTransition(t *testing.T, old state.Word, d *decoder) state.Word {
	t.Helper()
	m := modelOf(old)
	anchors := []int64{m.Count, m.Total, m.Held(), m.Max, m.Max - m.Total}
	wantFlags := old & flagBits
	var (
		op         string
		got        state.Word
		ok, wantOK bool
	)
	switch d.next() % 6 {
	case 0:
		// Zero-permit requests never reach the transition: the semaphore
		// grants them without touching the word.
		n := clamp(d.arg(anchors...), 1, model.MaxPermits)
		block := blocks[int(d.next())%len(blocks)]
		op = fmt.Sprintf("Acquire(%d, %#x)", n, uint64(block))
		got, ok = old.Acquire(n, block)
		// The transition sees only the flags in block. A caller that leaves
		// closed out has checked it itself, so to the model the semaphore is
		// open then; a queue flag in block refuses on its own.
		m.Closed = old&block&state.ClosedBit != 0
		wantOK = old&block&^state.ClosedBit == 0 && m.TryAcquire(n)
	case 1:
		n := clamp(d.arg(anchors...), 0, model.MaxPermits)
		op = fmt.Sprintf("Release(%d)", n)
		got, ok = old.Release(n)
		wantOK = m.Release(n)
	case 2:
		n := clamp(d.arg(anchors...), 0, model.MaxPermits)
		op = fmt.Sprintf("Forget(%d)", n)
		got, ok = old.Forget(n)
		wantOK = m.Forget(n)
	case 3:
		// TryRelease rejects n > MaxPermits before the transition.
		n := min(d.arg(anchors...), model.MaxPermits)
		op = fmt.Sprintf("TryRelease(%d)", n)
		got, ok = old.TryRelease(n)
		wantOK = m.TryRelease(n)
	case 4:
		limit := d.arg(anchors...)
		op = fmt.Sprintf("SetLimit(%d)", limit)
		got, ok = old.SetLimit(limit)
		wantOK = m.SetLimit(limit) == model.OK
	case 5:
		op = "Close()"
		got, ok = old.Close()
		wantOK = !m.Closed
		m.Close()
		wantFlags |= state.ClosedBit
	}
	where := fmt.Sprintf("%s on %s", op, describeWord(old))
	require.Equal(t, wantOK, ok, "%s: ok", where)
	if !ok {
		require.Equal(t, old, got, "%s: a refused transition must return the old word", where)
		return old
	}
	require.Empty(t, got.CheckInvariants(), "%s gave %s", where, describeWord(got))
	require.Equal(t, []int64{m.Count, m.Total, m.Max}, []int64{got.Count(), got.Total(), got.Max()},
		"%s: count, total, max", where)
	require.Equal(t, wantFlags, got&flagBits, "%s: flags", where)
	return got
}

// modelOf returns the model with the word's fields.
func modelOf(w state.Word) model.Semaphore {
	return model.Semaphore{Count: w.Count(), Total: w.Total(), Max: w.Max(), Closed: w.Closed()}
}

func describeWord(w state.Word) string {
	return fmt.Sprintf("word{count %d, held %d, total %d, max %d, queued %t, eligible %t, closed %t, starving %t}",
		w.Count(), w.Held(), w.Total(), w.Max(), w.Queued(), w.Eligible(), w.Closed(), w.Starving())
}

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }
