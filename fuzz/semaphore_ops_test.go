package fuzz_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/internal/model"
	"github.com/atomicsem/atomicsem/token"
)

// FuzzSemaphoreOps drives one real Semaphore and the model through the same
// sequence of operations from a single goroutine, in FIFO or barging mode,
// with or without a permit cache, and compares every result and, after
// every step, Stats. Tokens are
// released, forgotten and split; a WaitIdle is issued only when the model
// says it returns at once. With one goroutine nothing ever waits, so the two
// modes must behave alike; an Acquire with a live context is only issued
// when the model grants it at once.
func FuzzSemaphoreOps(f *testing.F) {
	for _, seed := range semaphoreSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &decoder{b: data}
		r := newOpsRun(t, d)
		if r == nil {
			return
		}
		for step := 0; step < 64 && d.more(); step++ {
			r.step(d)
			r.checkStats()
		}
	})
}

// opsRun is one FuzzSemaphoreOps execution: the semaphore, the model and the
// tokens taken so far.
type opsRun struct {
	t     *testing.T
	sem   *atomicsem.Semaphore
	m     model.Semaphore
	live  []heldToken
	spent []*token.Token
	log   []logEntry // the operations so far, to make failures readable
}

// logEntry is one line of an opsRun's log, formatted only if the run fails.
type logEntry struct {
	format string
	args   []any
}

type heldToken struct {
	tok *token.Token
	n   int64
}

// newOpsRun decodes the mode and New's arguments and checks New. It returns
// nil when New is expected to fail (and did).
func newOpsRun(t *testing.T, d *decoder) *opsRun {
	t.Helper()
	var opts []atomicsem.Option
	mode := "fifo"
	sel := d.next()
	if sel%2 == 1 {
		opts = append(opts, atomicsem.WithBarging())
		mode = "barging"
	}
	if sel&0x40 != 0 {
		// Its stripes are on once the limit is in the thousands or more,
		// which the decoder's large counts and the anchors reach.
		opts = append(opts, atomicsem.WithPermitCache())
		mode += ", permit cache"
	}
	initial, maxP := d.permits(), d.permits()
	r := &opsRun{t: t}
	r.note("New(%d, %d) %s", initial, maxP, mode)
	sem, err := atomicsem.New(initial, maxP, opts...)
	m, want := model.New(initial, maxP)
	require.Equal(t, want, r.outcome(err), r)
	if want != model.OK {
		require.Nil(t, sem)
		return nil
	}
	r.sem, r.m = sem, m
	r.checkStats()
	return r
}

// step decodes one operation, applies it to both sides and compares.
func (r *opsRun) step(d *decoder) {
	t, m := r.t, &r.m
	anchors := []int64{m.Available, m.Limit, m.Held(), m.Max, m.Max - m.Limit, 0}
	switch op := d.next() % 12; op {
	case 0:
		n := d.arg(anchors...)
		ctx := doneContext(d.next())
		r.note("Acquire(done %v, %d)", ctx.Err(), n)
		tok, err := r.sem.Acquire(ctx, n)
		r.checkAcquireErr(err, ctx, m.Acquire(n, true))
		r.checkToken(&tok, err == nil, n)
	case 1:
		n := d.arg(anchors...)
		if probe := *m; probe.Acquire(n, false) == model.WouldBlock {
			r.note("skip Acquire(live, %d): it would wait", n)
			return
		}
		r.note("Acquire(live, %d)", n)
		ctx, cancel := context.WithTimeout(context.Background(), acquireGuard)
		defer cancel()
		tok, err := r.sem.Acquire(ctx, n)
		require.NoError(t, ctx.Err(), "%s: waited although the model grants it at once", r)
		r.checkAcquireErr(err, ctx, m.Acquire(n, false))
		r.checkToken(&tok, err == nil, n)
	case 2:
		n := d.arg(anchors...)
		r.note("TryAcquire(%d)", n)
		tok, ok := r.sem.TryAcquire(n)
		require.Equal(t, m.TryAcquire(n), ok, r)
		r.checkToken(&tok, ok, n)
	case 3, 4:
		forget := op == 4
		if len(r.live) == 0 {
			r.note("skip end: no live token")
			return
		}
		i := int(d.next()) % len(r.live)
		h := r.live[i]
		r.live = append(r.live[:i], r.live[i+1:]...)
		require.Equal(t, h.n, h.tok.Permits(), "%s: live token's Permits", r)
		if forget {
			r.note("Forget(token of %d)", h.n)
			h.tok.Forget()
			require.True(t, m.Forget(h.n), "%s: model refuses Forget", r)
		} else {
			r.note("Release(token of %d)", h.n)
			h.tok.Release()
			require.True(t, m.Release(h.n), "%s: model refuses Release", r)
		}
		require.Zero(t, h.tok.Permits(), "%s: spent token's Permits", r)
		r.spent = append(r.spent, h.tok)
	case 5:
		tok := new(token.Token) // the zero Token, unless a spent one is picked
		sel := int(d.next())
		if len(r.spent) > 0 && sel%4 != 0 {
			tok = r.spent[sel%len(r.spent)]
		}
		end, name := tok.Release, "Release"
		if sel&0x80 != 0 {
			end, name = tok.Forget, "Forget"
		}
		r.note("%s again (spent or zero token)", name)
		require.True(t, strings.HasPrefix(panicMessage(end), "token:"),
			"%s: want a panic with prefix token:, got %q", r, panicMessage(end))
	case 6:
		n := d.arg(anchors...)
		r.note("TryRelease(%d)", n)
		require.Equal(t, m.TryRelease(n), r.sem.TryRelease(n), r)
	case 7:
		limit := d.arg(anchors...)
		r.note("SetLimit(%d)", limit)
		err := r.sem.SetLimit(limit)
		require.Equal(t, m.SetLimit(limit), r.outcome(err), "%s: %v", r, err)
	case 8:
		r.note("Close()")
		r.sem.Close()
		m.Close()
	case 9:
		n := d.arg(anchors...)
		r.note("Refill(%d)", n)
		require.Equal(t, m.Refill(n), r.sem.Refill(n), r)
	case 10:
		if len(r.live) == 0 {
			r.note("skip Split: no live token")
			return
		}
		i := int(d.next()) % len(r.live)
		h := &r.live[i]
		k := d.arg(h.n, 0)
		r.note("Split(%d) of a token of %d", k, h.n)
		part, ok := h.tok.Split(k)
		require.Equal(t, 0 <= k && k <= h.n, ok, r)
		if ok {
			h.n -= k
			require.Equal(t, h.n, h.tok.Permits(), "%s: the rest", r)
			r.checkToken(&part, true, k)
		} else {
			r.checkToken(&part, false, k)
		}
	case 11:
		ctx := context.Background()
		if d.next()%2 == 0 {
			ctx = doneContext(d.next())
		}
		want := m.WaitIdle(ctx.Err() != nil)
		if want == model.WouldBlock {
			r.note("skip WaitIdle(live): it would wait")
			return
		}
		r.note("WaitIdle(done %v)", ctx.Err())
		err := r.sem.WaitIdle(ctx)
		r.checkAcquireErr(err, ctx, want)
	}
}

// checkAcquireErr compares Acquire's error with the model's outcome; the
// context's error must come back unwrapped.
func (r *opsRun) checkAcquireErr(err error, ctx context.Context, want model.Outcome) {
	r.t.Helper()
	require.Equal(r.t, want, r.outcome(err), "%s: %v", r, err)
	if want == model.CtxDone {
		require.Equal(r.t, ctx.Err(), err, "%s: the context's error, unwrapped", r)
	}
}

// checkToken checks the token an acquire returned and keeps it if it was
// granted; a refused acquire must return the zero Token.
func (r *opsRun) checkToken(tok *token.Token, granted bool, n int64) {
	t := r.t
	t.Helper()
	if !granted {
		require.Zero(t, tok.Permits(), "%s: a failed acquire returns the zero Token", r)
		require.True(t, strings.HasPrefix(panicMessage(tok.Release), "token:"),
			"%s: a failed acquire returns the zero Token", r)
		return
	}
	require.Equal(t, n, tok.Permits(), "%s: granted token's Permits", r)
	r.live = append(r.live, heldToken{tok: tok, n: n})
}

// checkStats compares the semaphore's Stats with the model's. Nothing ever
// waits in these runs, so Waiters must be zero.
func (r *opsRun) checkStats() {
	r.t.Helper()
	got, want := r.sem.Stats(), r.m.Stats()
	require.Equal(r.t, want, model.Stats{
		Available: got.Available, Held: got.Held, Limit: got.Limit, Max: got.Max, Closed: got.Closed,
	}, "Stats after %s", r)
	require.Zero(r.t, got.Waiters, "Stats.Waiters after %s", r)
}

// outcome maps a semaphore error to the model's outcome, failing the run on
// an error that no contract names.
func (r *opsRun) outcome(err error) model.Outcome {
	r.t.Helper()
	o, ok := outcomeOf(err)
	require.True(r.t, ok, "%s: unexpected error %v", r, err)
	return o
}

// note adds an operation to the log.
func (r *opsRun) note(format string, args ...any) {
	r.log = append(r.log, logEntry{format, args})
}

// String returns the log. Assertions take r itself as their message
// argument, so that it is formatted only when one fails.
func (r *opsRun) String() string {
	lines := make([]string, len(r.log))
	for i, e := range r.log {
		lines[i] = fmt.Sprintf(e.format, e.args...)
	}
	return strings.Join(lines, "; ")
}

// panicMessage calls f and returns the message it panicked with, or "" if
// it returned.
func panicMessage(f func()) (msg string) {
	defer func() {
		if v := recover(); v != nil {
			msg = fmt.Sprint(v)
		}
	}()
	f()
	return ""
}
