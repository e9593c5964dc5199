package bench_test

import (
	"sync/atomic"
	"testing"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/internal/state"
	"github.com/atomicsem/atomicsem/token"
)

// BenchmarkShape takes atomicsem's TryAcquire+Release apart, building up
// from floorcas's loop one step at a time (docs/benchmarks.md, What would
// close the remaining gaps):
//
//	floorcas   a CAS that takes a permit and a CAS that returns it, inlined
//	tokencas   the same, with the acquire in a call the compiler may not
//	           inline that returns a token.Token, and the release through
//	           the token: its guard and its interface call to the owner
//	wordcas    tokencas on atomicsem's word, with its checks before each
//	           CAS (block flags, limit, eligible, held) and held rebuilt
//	atomicsem  TryAcquire and the token's Release
func BenchmarkShape(b *testing.B) {
	b.Run("impl=floorcas", func(b *testing.B) {
		f, h := &floorCASSem{}, new(held)
		f.v.Store(1)
		defer measureCPU(b)()
		for i := 0; i < b.N; i++ {
			if !f.tryAcquire(1, h) {
				b.Fatal("floorcas failed on a free semaphore")
			}
			f.release(h)
		}
	})
	b.Run("impl=tokencas", func(b *testing.B) {
		s := &tokenCAS{}
		s.v.Store(1)
		defer measureCPU(b)()
		for i := 0; i < b.N; i++ {
			t, ok := s.tryAcquire(1)
			if !ok {
				b.Fatal("tokencas failed on a free semaphore")
			}
			t.Release()
		}
	})
	b.Run("impl=wordcas", func(b *testing.B) {
		s := &wordCAS{block: state.ClosedBit | state.EligibleBit}
		s.word.Store(uint64(state.New(1, 1, 1)))
		defer measureCPU(b)()
		for i := 0; i < b.N; i++ {
			t, ok := s.tryAcquire(1)
			if !ok {
				b.Fatal("wordcas failed on a free semaphore")
			}
			t.Release()
		}
	})
	b.Run("impl=atomicsem", func(b *testing.B) {
		s, _ := atomicsem.New(1, 1)
		defer measureCPU(b)()
		for i := 0; i < b.N; i++ {
			t, ok := s.TryAcquire(1)
			if !ok {
				b.Fatal("TryAcquire failed on a free semaphore")
			}
			t.Release()
		}
	})
}

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
