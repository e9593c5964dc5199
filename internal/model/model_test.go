package model_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/internal/model"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestMaxPermitsMatchesTheSemaphore(t *testing.T) {
	require.EqualValues(t, atomicsem.MaxPermits, model.MaxPermits)
}

func TestNewChecksItsArguments(t *testing.T) {
	tests := []struct {
		name         string
		initial, max int64
		want         model.Outcome
	}{
		{"empty", 0, 0, model.OK},
		{"below max", 2, 5, model.OK},
		{"at MaxPermits", model.MaxPermits, model.MaxPermits, model.OK},
		{"negative initial", -1, 5, model.InvalidPermits},
		{"initial above max", 6, 5, model.InvalidPermits},
		{"max above MaxPermits", 0, model.MaxPermits + 1, model.InvalidPermits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, got := model.New(tt.initial, tt.max)
			require.Equal(t, tt.want, got)
			if got == model.OK {
				require.Equal(t, model.Semaphore{Available: tt.initial, Limit: tt.initial, Max: tt.max}, s)
			}
		})
	}
}

// newSem builds a model with held permits already taken, which New alone
// cannot express.
func newSem(count, total, max int64) model.Semaphore {
	return model.Semaphore{Available: count, Limit: total, Max: max}
}

// transition is one row of a method's table: a model, one call on it, what
// the call returns and the model after it.
type transition[R any] struct {
	name  string
	s     model.Semaphore
	call  func(s *model.Semaphore) R
	want  R
	after model.Semaphore
}

// checkTransitions makes each row's call on a copy of its model.
func checkTransitions[R any](t *testing.T, tests []transition[R]) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s
			require.Equal(t, tt.want, tt.call(&s))
			require.Equal(t, tt.after, s)
		})
	}
}

func TestAcquire(t *testing.T) {
	acquire := func(n int64, ctxDone bool) func(*model.Semaphore) model.Outcome {
		return func(s *model.Semaphore) model.Outcome { return s.Acquire(n, ctxDone) }
	}
	closed := model.Semaphore{Available: 3, Limit: 3, Max: 5, Closed: true}
	checkTransitions(t, []transition[model.Outcome]{
		{"takes free permits", newSem(3, 3, 5), acquire(2, false), model.OK, newSem(1, 3, 5)},
		{"waits when short", newSem(1, 3, 5), acquire(2, false), model.WouldBlock, newSem(1, 3, 5)},
		{"waits above the limit but within max", newSem(3, 3, 5), acquire(4, false), model.WouldBlock, newSem(3, 3, 5)},
		{"zero is granted in debt", newSem(-2, 1, 5), acquire(0, false), model.OK, newSem(-2, 1, 5)},
		{"negative", newSem(3, 3, 5), acquire(-1, false), model.InvalidPermits, newSem(3, 3, 5)},
		{"above MaxPermits", newSem(3, 3, 5), acquire(model.MaxPermits+1, true), model.InvalidPermits, newSem(3, 3, 5)},
		{"above max", newSem(3, 3, 5), acquire(6, true), model.ExceedsMax, newSem(3, 3, 5)},
		{"done ctx beats free permits", newSem(3, 3, 5), acquire(1, true), model.CtxDone, newSem(3, 3, 5)},
		{"done ctx beats closed", closed, acquire(1, true), model.CtxDone, closed},
		{"closed", closed, acquire(0, false), model.Closed, closed},
	})
}

func TestTryAcquire(t *testing.T) {
	try := func(n int64) func(*model.Semaphore) bool {
		return func(s *model.Semaphore) bool { return s.TryAcquire(n) }
	}
	closed := model.Semaphore{Available: 3, Limit: 3, Max: 5, Closed: true}
	checkTransitions(t, []transition[bool]{
		{"takes free permits", newSem(3, 3, 5), try(3), true, newSem(0, 3, 5)},
		{"refuses when short", newSem(1, 3, 5), try(2), false, newSem(1, 3, 5)},
		{"zero in debt", newSem(-1, 1, 5), try(0), true, newSem(-1, 1, 5)},
		{"negative", newSem(3, 3, 5), try(-1), false, newSem(3, 3, 5)},
		{"above max", newSem(3, 3, 5), try(6), false, newSem(3, 3, 5)},
		{"closed", closed, try(0), false, closed},
	})
}

func TestReleaseAndForget(t *testing.T) {
	release := func(n int64) func(*model.Semaphore) bool {
		return func(s *model.Semaphore) bool { return s.Release(n) }
	}
	forget := func(n int64) func(*model.Semaphore) bool {
		return func(s *model.Semaphore) bool { return s.Forget(n) }
	}
	checkTransitions(t, []transition[bool]{
		{"release returns permits", newSem(1, 4, 5), release(3), true, newSem(4, 4, 5)},
		{"release pays debt first", newSem(-2, 1, 5), release(2), true, newSem(0, 1, 5)},
		{"release more than held", newSem(1, 4, 5), release(4), false, newSem(1, 4, 5)},
		{"forget lowers the limit", newSem(1, 4, 5), forget(2), true, newSem(1, 2, 5)},
		{"forget in debt keeps the limit at zero", newSem(-2, 1, 5), forget(3), true, newSem(0, 0, 5)},
		{"forget part of the debt", newSem(-3, 1, 5), forget(2), true, newSem(-2, 0, 5)},
		{"forget more than held", newSem(1, 4, 5), forget(4), false, newSem(1, 4, 5)},
		{"negative", newSem(1, 4, 5), forget(-1), false, newSem(1, 4, 5)},
	})
}

func TestTryRelease(t *testing.T) {
	try := func(n int64) func(*model.Semaphore) bool {
		return func(s *model.Semaphore) bool { return s.TryRelease(n) }
	}
	closed := model.Semaphore{Available: 1, Limit: 3, Max: 5, Closed: true}
	checkTransitions(t, []transition[bool]{
		{"adds permits", newSem(1, 3, 5), try(2), true, newSem(3, 5, 5)},
		{"held permits count against max", newSem(0, 3, 5), try(3), false, newSem(0, 3, 5)},
		{"zero", newSem(1, 3, 5), try(0), false, newSem(1, 3, 5)},
		{"huge n does not overflow", newSem(1, 3, 5), try(1<<63 - 1), false, newSem(1, 3, 5)},
		{"closed", closed, try(1), false, closed},
	})
}

func TestRefill(t *testing.T) {
	refill := func(n int64) func(*model.Semaphore) int64 {
		return func(s *model.Semaphore) int64 { return s.Refill(n) }
	}
	closed := model.Semaphore{Available: 1, Limit: 3, Max: 5, Closed: true}
	checkTransitions(t, []transition[int64]{
		{"adds all that fits", newSem(1, 3, 5), refill(2), 2, newSem(3, 5, 5)},
		{"adds only what fits", newSem(1, 3, 5), refill(10), 2, newSem(3, 5, 5)},
		{"counts held permits against max", newSem(0, 3, 5), refill(4), 2, newSem(2, 5, 5)},
		{"full", newSem(5, 5, 5), refill(1), 0, newSem(5, 5, 5)},
		{"nothing asked", newSem(1, 3, 5), refill(0), 0, newSem(1, 3, 5)},
		{"negative", newSem(1, 3, 5), refill(-1), 0, newSem(1, 3, 5)},
		{"closed", closed, refill(1), 0, closed},
	})
}

func TestWaitIdle(t *testing.T) {
	waitIdle := func(ctxDone bool) func(*model.Semaphore) model.Outcome {
		return func(s *model.Semaphore) model.Outcome { return s.WaitIdle(ctxDone) }
	}
	checkTransitions(t, []transition[model.Outcome]{
		{"nothing held", newSem(3, 3, 5), waitIdle(false), model.OK, newSem(3, 3, 5)},
		{"nothing held, done ctx", newSem(3, 3, 5), waitIdle(true), model.OK, newSem(3, 3, 5)},
		{"held", newSem(1, 3, 5), waitIdle(false), model.WouldBlock, newSem(1, 3, 5)},
		{"held, done ctx", newSem(1, 3, 5), waitIdle(true), model.CtxDone, newSem(1, 3, 5)},
		{"in debt", newSem(-2, 0, 5), waitIdle(false), model.WouldBlock, newSem(-2, 0, 5)},
	})
}

func TestSetLimit(t *testing.T) {
	setLimit := func(limit int64) func(*model.Semaphore) model.Outcome {
		return func(s *model.Semaphore) model.Outcome { return s.SetLimit(limit) }
	}
	closed := model.Semaphore{Available: 1, Limit: 3, Max: 5, Closed: true}
	checkTransitions(t, []transition[model.Outcome]{
		{"raise", newSem(1, 3, 5), setLimit(5), model.OK, newSem(3, 5, 5)},
		{"lower into debt", newSem(1, 3, 5), setLimit(0), model.OK, newSem(-2, 0, 5)},
		{"negative", newSem(1, 3, 5), setLimit(-1), model.InvalidPermits, newSem(1, 3, 5)},
		{"above max", newSem(1, 3, 5), setLimit(6), model.ExceedsMax, newSem(1, 3, 5)},
		{"closed", closed, setLimit(2), model.Closed, closed},
		{"above max beats closed", closed, setLimit(6), model.ExceedsMax, closed},
	})
}

func TestCloseKeepsTokensWorking(t *testing.T) {
	s := newSem(1, 3, 5)
	s.Close()
	s.Close()
	require.True(t, s.Closed)
	require.True(t, s.Release(2))
	require.Equal(t, model.Stats{Available: 3, Held: 0, Limit: 3, Max: 5, Closed: true}, s.Stats())
	require.False(t, s.TryRelease(1))
}

func TestOutcomeNames(t *testing.T) {
	require.Equal(t, "ok", model.OK.String())
	require.Equal(t, "would block", model.WouldBlock.String())
	require.Equal(t, "Outcome(?)", model.Outcome(200).String())
}
