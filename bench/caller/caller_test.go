// Package caller_test benchmarks atomicsem from a package that imports
// atomicsem alone, as most callers do: they end the tokens that Acquire
// returns without ever naming token.Token, so they do not import package
// token. The rest of the suite imports it (its harness stores tokens), and
// whether a caller can inline the token's Release depends on what the
// caller's package imports (docs/benchmarks.md, optimisation 14).
package caller_test

import (
	"context"
	"testing"

	"github.com/atomicsem/atomicsem/atomicsem"
)

func BenchmarkCaller(b *testing.B) {
	ctx := context.Background()
	b.Run("op=acquire", func(b *testing.B) {
		s, _ := atomicsem.New(1, 1)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			t, err := s.Acquire(ctx, 1)
			if err != nil {
				b.Fatal(err)
			}
			t.Release()
		}
	})
	b.Run("op=tryacquire", func(b *testing.B) {
		s, _ := atomicsem.New(1, 1)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			t, ok := s.TryAcquire(1)
			if !ok {
				b.Fatal("TryAcquire failed on a free semaphore")
			}
			t.Release()
		}
	})
	b.Run("op=forget", func(b *testing.B) {
		s, _ := atomicsem.New(1, 1)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			t, ok := s.TryAcquire(1)
			if !ok {
				b.Fatal("TryAcquire failed on a free semaphore")
			}
			t.Forget()
			if !s.TryRelease(1) {
				b.Fatal("TryRelease refused a forgotten permit")
			}
		}
	})
}
