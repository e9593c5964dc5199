package bench_test

// tokencas and wordcas take atomicsem's fast paths apart (TryAcquire and
// Release, and Acquire with its context check), building up from floorcas's
// loop in BenchmarkDirect, BenchmarkUncontended and BenchmarkParallel; availcas asks
// whether another layout of the word would check it more cheaply
// (docs/benchmarks.md, What would close the remaining gaps).

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
		if old.Eligible() || held < 0 {
			panic("wordcas returned what it did not hold")
		}
		if s.word.CompareAndSwap(uint64(old), uint64(old.WithHeld(held))) {
			return
		}
	}
}

func (s *wordCAS) ForgetPermits(int64, uint32) { panic("wordcas does not forget") }

func (s *wordCAS) SplitPermits(_, _ int64, tag uint32) (token.Owner, uint32) { return s, tag }

// availCAS is wordCAS on a word laid out for a shorter acquire: the
// available count, signed, in the top bits, so that an acquire is one
// subtraction whose sign says whether it may happen. The price is the range:
// with total and max in the word as well, each field has 19 bits, not 20.
//
//	 63 ......... 43   42 ....... 24   23 ........ 5   4 .. 2   1        0
//	+---------------+---------------+---------------+--------+------+--------+
//	| available (21)|  total (19)   |   max (19)    | unused |closed|eligible|
//	+---------------+---------------+---------------+--------+------+--------+
//
// A release still decodes total to check that n permits are held
// (held = total − available).
type availCAS struct {
	word  atomic.Uint64
	_     [120]byte
	block uint64
}

const (
	availShift    = 43
	availTotalSh  = 24
	availMaxSh    = 5
	availField    = 1<<19 - 1
	availEligible = 1 << 0
	availClosed   = 1 << 1
)

// newAvailCAS returns an availCAS with count of total permits available.
func newAvailCAS(count, total, max int64) *availCAS {
	s := &availCAS{block: availClosed | availEligible}
	s.word.Store(uint64(count)<<availShift | uint64(total)<<availTotalSh | uint64(max)<<availMaxSh)
	return s
}

func (s *availCAS) available() int64 { return int64(s.word.Load()) >> availShift }

//go:noinline
func (s *availCAS) tryAcquire(n int64) (token.Token, bool) {
	for {
		old := s.word.Load()
		new := old - uint64(n)<<availShift
		if int64(new) < 0 || old&s.block != 0 {
			return token.Token{}, false
		}
		if s.word.CompareAndSwap(old, new) {
			return token.New(s, n, 0), true
		}
	}
}

func (s *availCAS) ReturnPermits(n int64, _ uint32) {
	for {
		old := s.word.Load()
		total := int64(old>>availTotalSh) & availField
		if old&availEligible != 0 || total-int64(old)>>availShift < n {
			panic("availcas returned what it did not hold")
		}
		if s.word.CompareAndSwap(old, old+uint64(n)<<availShift) {
			return
		}
	}
}

func (s *availCAS) ForgetPermits(int64, uint32) { panic("availcas does not forget") }

func (s *availCAS) SplitPermits(_, _ int64, tag uint32) (token.Owner, uint32) { return s, tag }

// tokenCASSem and wordCASSem put tokencas and wordcas behind the harness's
// sem interface, so that BenchmarkUncontended and BenchmarkParallel can take
// atomicsem's fast paths apart as BenchmarkDirect does. There the token lives in the harness's
// record on the heap, not in the benchmark loop's frame, and costs more. The
// two are written out, not one generic adapter: a type parameter would
// reach tryAcquire through a dictionary, an indirect call atomicsem's
// adapter does not make.
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
