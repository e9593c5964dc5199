package fuzz_test

import (
	"fmt"

	"github.com/anishathalye/porcupine"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/internal/model"
)

// linOp names an operation in a recorded history.
type linOp uint8

const (
	opAcquire linOp = iota
	opTryAcquire
	opRelease // a token's Release; n is the token's count
	opForget  // a token's Forget; n is the token's count
	opTryRelease
	opSetLimit
	opClose
	opStats
)

var linOpNames = [...]string{
	opAcquire:    "Acquire",
	opTryAcquire: "TryAcquire",
	opRelease:    "Release",
	opForget:     "Forget",
	opTryRelease: "TryRelease",
	opSetLimit:   "SetLimit",
	opClose:      "Close",
	opStats:      "Stats",
}

// linInput is an operation's input in a history. The last two fields are
// not arguments: annotate fills them in from the whole history, for the
// checks that a parked waiter may legitimately influence.
type linInput struct {
	op      linOp
	n       int64  // permits, a token's count, or the limit
	ctxDone bool   // Acquire: the context was done before the call
	ctx     string // Acquire: how the context was made, for the visualization

	// overlapping counts the Acquire calls whose intervals overlap this
	// operation's. Only an Acquire in progress can park a waiter.
	overlapping int
	// cancelled sums the permits of the overlapping Acquire calls that
	// returned the context's error: such a call may have been granted its
	// permits and given them back on cancelling.
	cancelled int64
}

// linOutput is an operation's result.
type linOutput struct {
	outcome model.Outcome   // Acquire, SetLimit
	ok      bool            // TryAcquire, TryRelease
	stats   atomicsem.Stats // Stats
}

// linModel is the sequential specification that histories must match: the
// model semaphore started with New(initial, max), stepped by linStep.
func linModel(initial, max int64) porcupine.Model {
	return porcupine.Model{
		Init: func() any {
			s, _ := model.New(initial, max)
			return s
		},
		Step:              linStep,
		DescribeOperation: describeLinOp,
		DescribeState: func(state any) string {
			s := state.(model.Semaphore)
			return fmt.Sprintf("available %d, limit %d, max %d, closed %t", s.Available, s.Limit, s.Max, s.Closed)
		},
	}
}

// linStep reports whether the model, in state, can perform the operation
// with the recorded result, and returns the state after it.
//
// Each operation takes effect at one instant between its call and its
// return, as the model's method does. The model has no wait queue, so what
// fairness decides is not checked here: a blocking Acquire may be granted
// at any instant at which the model has its permits free, whether or not
// FIFO order would have served it then (FIFO order has its own tests).
// Three relaxations follow from parked waiters, which only an Acquire in
// progress can create:
//
//   - An Acquire that returns the context's error takes effect as nothing,
//     whenever its context was live at the call.
//   - TryAcquire may refuse permits the model has free while an Acquire
//     overlaps it: in FIFO mode it must not overtake a parked waiter, and in
//     barging mode it must not while one is starving.
//   - Stats may show fewer permits available than the model, by at most the
//     permits of overlapping Acquires that were cancelled (a grant racing a
//     cancellation holds them until it is given back), and at most as many
//     waiters as there are overlapping Acquires.
func linStep(state, input, output any) (bool, any) {
	s := state.(model.Semaphore)
	in, out := input.(linInput), output.(linOutput)
	switch in.op {
	case opAcquire:
		if req := s.CheckRequest(in.n); req != model.OK || in.ctxDone {
			return s.Acquire(in.n, in.ctxDone) == out.outcome, s
		}
		switch out.outcome {
		case model.OK:
			return s.Acquire(in.n, false) == model.OK, s
		case model.CtxDone:
			return true, s
		case model.Closed:
			return s.Closed, s
		}
		return false, s
	case opTryAcquire:
		if probe := s; probe.TryAcquire(in.n) == out.ok {
			return true, probe
		}
		return !out.ok && in.overlapping > 0, s
	case opRelease:
		return s.Release(in.n), s
	case opForget:
		return s.Forget(in.n), s
	case opTryRelease:
		return s.TryRelease(in.n) == out.ok, s
	case opSetLimit:
		return s.SetLimit(in.n) == out.outcome, s
	case opClose:
		s.Close()
		return true, s
	case opStats:
		want, got := s.Stats(), out.stats
		return got.Limit == want.Limit && got.Max == want.Max && got.Closed == want.Closed &&
			got.Available <= want.Available && got.Available >= want.Available-in.cancelled &&
			got.Waiters >= 0 && got.Waiters <= in.overlapping, s
	}
	return false, s
}

func describeLinOp(input, output any) string {
	in, out := input.(linInput), output.(linOutput)
	name := linOpNames[in.op]
	switch in.op {
	case opAcquire:
		return fmt.Sprintf("%s(%d, %s) → %v", name, in.n, in.ctx, out.outcome)
	case opTryAcquire, opTryRelease:
		return fmt.Sprintf("%s(%d) → %t", name, in.n, out.ok)
	case opRelease, opForget:
		return fmt.Sprintf("%s(token of %d)", name, in.n)
	case opSetLimit:
		return fmt.Sprintf("%s(%d) → %v", name, in.n, out.outcome)
	case opStats:
		st := out.stats
		return fmt.Sprintf("Stats → available %d, held %d, limit %d, waiters %d, closed %t",
			st.Available, st.Held, st.Limit, st.Waiters, st.Closed)
	}
	return name + "()"
}

// annotate fills in each operation's overlapping and cancelled fields from
// the Acquire calls that overlap it in time (closed intervals, as porcupine
// reads them).
func annotate(ops []porcupine.Operation) {
	for i := range ops {
		in := ops[i].Input.(linInput)
		in.overlapping, in.cancelled = 0, 0
		for j := range ops {
			a := ops[j].Input.(linInput)
			if j == i || a.op != opAcquire || ops[j].Return < ops[i].Call || ops[i].Return < ops[j].Call {
				continue
			}
			in.overlapping++
			if ops[j].Output.(linOutput).outcome == model.CtxDone {
				in.cancelled += a.n
			}
		}
		ops[i].Input = in
	}
}
