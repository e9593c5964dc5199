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
// against the model: an accepted transition keeps I1 and I2, its fields equal the
// model's int64 arithmetic (so nothing wrapped), and it keeps every flag but
// the one it exists to set; a refused transition returns the old word; and
// both agree with the model on whether the operation may happen.
func FuzzTransitions(f *testing.F) {
	for _, seed := range transitionSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &decoder{b: data}
		w, maxP := decodeWord(t, d)
		for step := 0; step < 16 && d.more(); step++ {
			w = checkTransition(t, w, maxP, d)
		}
	})
}

// flagBits are the word's flags and queue state, which no counting
// transition may touch.
const flagBits = state.ClosedBit | state.IdleBit | state.BlockBarging

// blocks are the block words the semaphore passes to Acquire: closed alone
// (the caller has checked the queue under the lock), and the FIFO and
// barging fast paths' blocks.
var blocks = []state.Word{state.ClosedBit, state.BlockFIFO, state.BlockBarging}

// decodeWord builds a word that holds I1 and I2 for a maximum it also
// decodes, with arbitrary flags, and checks that the fields read back as
// written.
func decodeWord(t *testing.T, d *decoder) (state.Word, int64) {
	t.Helper()
	maxP := d.upTo(model.MaxPermits)
	limit := d.upTo(maxP)
	held := d.upTo(maxP)
	f := d.next()
	w := state.New(held, limit).WithQueue(state.Queue(f & 3)).WithIdle(f&4 != 0)
	if f&8 != 0 {
		w |= state.ClosedBit
	}
	require.Equal(t, []int64{held, limit, limit - held}, []int64{w.Held(), w.Limit(), w.Available()},
		"New(%d, %d) does not read back", held, limit)
	require.Equal(t, state.Queue(f&3), w.Queue())
	require.Equal(t, f&4 != 0, w.Idle())
	require.Equal(t, f&8 != 0, w.Closed())
	require.Equal(t, w.Queue() >= state.Queued, w.Queued())
	require.Equal(t, w.Queue() >= state.Eligible, w.Eligible())
	require.Equal(t, w.Queue() == state.Starving, w.Starving())
	require.Empty(t, w.CheckInvariants(maxP), "word %#x built from valid fields", uint64(w))
	return w, maxP
}

// checkTransition applies one transition chosen by the input to old, on a
// semaphore of maximum maxP, and returns the word that results.
func checkTransition(t *testing.T, old state.Word, maxP int64, d *decoder) state.Word {
	t.Helper()
	m := modelOf(old, maxP)
	anchors := []int64{m.Available, m.Limit, m.Held(), m.Max, m.Max - m.Limit}
	wantFlags := old & flagBits
	var (
		op         string
		got        state.Word
		ok, wantOK bool
	)
	switch d.next() % 7 {
	case 0:
		// Zero-permit requests never reach the transition: the semaphore
		// grants them without touching the word.
		n := clamp(d.arg(anchors...), 1, model.MaxPermits)
		block := blocks[int(d.next())%len(blocks)]
		op = fmt.Sprintf("Acquire(%d, %#x)", n, uint64(block))
		got, ok = old.Acquire(n, block)
		// Every block stops a closed word; the fast paths' blocks also
		// stop the queue states they name.
		blocked := old.Closed() ||
			(block == state.BlockFIFO && old.Eligible()) ||
			(block == state.BlockBarging && old.Starving())
		wantOK = !blocked && m.TryAcquire(n)
	case 1:
		n := clamp(d.arg(anchors...), 0, model.MaxPermits)
		op = fmt.Sprintf("Release(%d)", n)
		got, ok = old.Release(n)
		wantOK = m.Release(n)
	case 2:
		n := clamp(d.arg(anchors...), 0, model.MaxPermits)
		op = fmt.Sprintf("Forget(%d)", n)
		got, ok = old.Forget(n, maxP)
		wantOK = m.Forget(n)
	case 3:
		n := d.arg(anchors...)
		op = fmt.Sprintf("TryRelease(%d)", n)
		got, ok = old.TryRelease(n, maxP)
		wantOK = m.TryRelease(n)
	case 4:
		n := d.arg(anchors...)
		op = fmt.Sprintf("Refill(%d)", n)
		got, ok = old.Refill(n, maxP)
		added := m.Refill(n)
		wantOK = added > 0
		if ok {
			require.Equal(t, added, got.Limit()-old.Limit(), "Refill(%d) on %s: added", n, describeWord(old))
		}
	case 5:
		limit := d.arg(anchors...)
		op = fmt.Sprintf("SetLimit(%d)", limit)
		got, ok = old.SetLimit(limit, maxP)
		wantOK = m.SetLimit(limit) == model.OK
	case 6:
		op = "Close()"
		got, ok = old.Close()
		wantOK = !m.Closed
		m.Close()
		wantFlags |= state.ClosedBit
	}
	where := fmt.Sprintf("%s on %s, max %d", op, describeWord(old), maxP)
	require.Equal(t, wantOK, ok, "%s: ok", where)
	if !ok {
		require.Equal(t, old, got, "%s: a refused transition must return the old word", where)
		return old
	}
	require.Empty(t, got.CheckInvariants(maxP), "%s gave %s", where, describeWord(got))
	require.Equal(t, []int64{m.Available, m.Limit, m.Held()}, []int64{got.Available(), got.Limit(), got.Held()},
		"%s: available, limit, held", where)
	require.Equal(t, wantFlags, got&flagBits, "%s: flags", where)
	return got
}

// modelOf returns the model with the word's fields.
func modelOf(w state.Word, maxP int64) model.Semaphore {
	return model.Semaphore{Available: w.Available(), Limit: w.Limit(), Max: maxP, Closed: w.Closed()}
}

func describeWord(w state.Word) string {
	return fmt.Sprintf("word{available %d, held %d, limit %d, queue %d, idle %t, closed %t}",
		w.Available(), w.Held(), w.Limit(), w.Queue(), w.Idle(), w.Closed())
}

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }
