package bench_test

// tokencas and wordcas, in BenchmarkDirect, take atomicsem's
// TryAcquire+Release apart, building up from floorcas's loop
// (docs/benchmarks.md, What would close the remaining gaps).

import (
	"sync/atomic"

	"github.com/atomicsem/atomicsem/internal/state"
	"github.com/atomicsem/atomicsem/token"
)

// tokenCAS is floorcas behind atomicsem's interface: an acquire that
// returns a token.Token, a release through it.
type tokenCAS struct{ v atomic.Int64 }

//go:noinline
func (s *tokenCAS) tryAcquire(n int64) (token.Token, bool) {
	for {
		old := s.v.Load()
		if old < n {
			return token.Token{}, false
		}
		if s.v.CompareAndSwap(old, old-n) {
			return token.New(s, n), true
		}
	}
}

func (s *tokenCAS) ReturnPermits(n int64) {
	for {
		old := s.v.Load()
		if s.v.CompareAndSwap(old, old+n) {
			return
		}
	}
}

func (s *tokenCAS) ForgetPermits(int64) { panic("tokencas does not forget") }

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
		if old&s.block != 0 || held > old.Total() {
			return token.Token{}, false
		}
		if s.word.CompareAndSwap(uint64(old), uint64(old.WithHeld(held))) {
			return token.New(s, n), true
		}
	}
}

func (s *wordCAS) ReturnPermits(n int64) {
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

func (s *wordCAS) ForgetPermits(int64) { panic("wordcas does not forget") }
