package bench_test

// tokencas and wordcas take atomicsem's fast paths apart (TryAcquire and
// Release, and Acquire with its context check), building up from floorcas's
// loop in two steps in BenchmarkUncontended and BenchmarkParallel: tokencas
// adds the call and the token, wordcas atomicsem's word and its checks.
// What atomicsem costs beyond wordcas is its own code around them.

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/atomicsem/atomicsem/internal/state"
	"github.com/atomicsem/atomicsem/token"
)

// tokenCAS is floorcas behind atomicsem's interface: an acquire that
// returns a token.Token, a release through it.
type tokenCAS struct{ v atomic.Int64 }

// newTokenCAS returns a tokenCAS with count permits available.
func newTokenCAS(count int64) *tokenCAS {
	s := &tokenCAS{}
	s.v.Store(count)
	return s
}

//go:noinline
func (s *tokenCAS) tryAcquire(n int64) (token.Token, bool) {
	for {
		old := s.v.Load()
		if old < n {
			return token.Token{}, false
		}
		if s.v.CompareAndSwap(old, old-n) {
			return token.New(s, n, 0), true
		}
	}
}

// acquire is tryAcquire with what atomicsem's Acquire must do first: fail
// for a done context even when permits are free. It never waits; the
// benchmarks that run it never run short of permits. The loop is written
// out rather than a call of tryAcquire, which is not inlined: atomicsem's
// Acquire makes no such call.
//
//go:noinline
func (s *tokenCAS) acquire(ctx context.Context, n int64) (token.Token, error) {
	if ctx.Err() != nil {
		return token.Token{}, ctx.Err()
	}
	for {
		old := s.v.Load()
		if old < n {
			return token.Token{}, errWouldWait
		}
		if s.v.CompareAndSwap(old, old-n) {
			return token.New(s, n, 0), nil
		}
	}
}

// errWouldWait is what tokencas's and wordcas's acquire return where
// atomicsem's would park.
var errWouldWait = errors.New("bench: out of permits, and this floor cannot wait")

func (s *tokenCAS) ReturnPermits(n int64, _ uint32) {
	for {
		old := s.v.Load()
		if s.v.CompareAndSwap(old, old+n) {
			return
		}
	}
}

func (s *tokenCAS) ForgetPermits(int64, uint32) { panic("tokencas does not forget") }

func (s *tokenCAS) SplitPermits(_, _ int64, tag uint32) (token.Owner, uint32) { return s, tag }

// wordCAS is tokenCAS on atomicsem's packed word, with atomicsem's checks
// and its block mask on a line of its own.
type wordCAS struct {
	word  atomic.Uint64
	_     [120]byte
	block state.Word
}

//go:noinline
func (s *wordCAS) tryAcquire(n int64) (token.Token, bool) {
	for {
		old := state.Word(s.word.Load())
		held := old.Held() + n
		if old >= s.block || held > old.Limit() {
			return token.Token{}, false
		}
		if s.word.CompareAndSwap(uint64(old), uint64(old.WithHeld(held))) {
			return token.New(s, n, 0), true
		}
	}
}

// acquire is tryAcquire after the context check, as tokenCAS.acquire is.
//
//go:noinline
func (s *wordCAS) acquire(ctx context.Context, n int64) (token.Token, error) {
	if ctx.Err() != nil {
		return token.Token{}, ctx.Err()
	}
	for {
		old := state.Word(s.word.Load())
		held := old.Held() + n
		if old >= s.block || held > old.Limit() {
			return token.Token{}, errWouldWait
		}
		if s.word.CompareAndSwap(uint64(old), uint64(old.WithHeld(held))) {
			return token.New(s, n, 0), nil
		}
	}
}

func (s *wordCAS) ReturnPermits(n int64, _ uint32) {
	for {
		old := state.Word(s.word.Load())
		held := old.Held() - n
		if held < 0 || old.ReleaseBlocked() {
			// atomicsem serves the queue, ends WaitIdle or panics here;
			// the benchmarks never reach it.
			panic("wordcas cannot return these permits without a lock")
		}
		if s.word.CompareAndSwap(uint64(old), uint64(old.WithHeld(held))) {
			return
		}
	}
}

func (s *wordCAS) ForgetPermits(int64, uint32) { panic("wordcas does not forget") }

func (s *wordCAS) SplitPermits(_, _ int64, tag uint32) (token.Owner, uint32) { return s, tag }

// tokenCASSem and wordCASSem put tokencas and wordcas behind the harness's
// sem interface, as atomicsemSem puts atomicsem: the token lives in the
// harness's record, as atomicsem's does. The two are written out, not one
// generic adapter: a type parameter would reach tryAcquire through a
// dictionary, an indirect call atomicsem's adapter does not make.
type tokenCASSem struct{ s *tokenCAS }

func (a tokenCASSem) acquire(ctx context.Context, n int64, h *held) error {
	var err error
	h.tok, err = a.s.acquire(ctx, n)
	return err
}

func (a tokenCASSem) tryAcquire(n int64, h *held) bool {
	var ok bool
	h.tok, ok = a.s.tryAcquire(n)
	return ok
}

func (a tokenCASSem) release(h *held) { h.tok.Release() }

type wordCASSem struct{ s *wordCAS }

func (a wordCASSem) acquire(ctx context.Context, n int64, h *held) error {
	var err error
	h.tok, err = a.s.acquire(ctx, n)
	return err
}

func (a wordCASSem) tryAcquire(n int64, h *held) bool {
	var ok bool
	h.tok, ok = a.s.tryAcquire(n)
	return ok
}

func (a wordCASSem) release(h *held) { h.tok.Release() }

// newWordCAS returns a wordCAS with count of total permits available out of
// a ceiling of max, nothing queued.
func newWordCAS(count, total, max int64) *wordCAS {
	s := &wordCAS{block: state.BlockFIFO}
	s.word.Store(uint64(state.New(total-count, total)))
	return s
}
