package overload_test

import (
	"context"
	"testing"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/overload"
)

func BenchmarkQuick(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=atomicsem", func(b *testing.B) {
		s := atomicsem.MustNew(100, 100)
		for b.Loop() {
			t, _ := s.Acquire(ctx, 1)
			t.Release()
		}
	})
	for _, k := range []int{1, 2, 4} {
		cl := []overload.Class{{Name: "a", Share: 0.5}, {Name: "b"}, {Name: "c"}, {Name: "d"}}[:k]
		g := overload.MustNew(100, 100, cl)
		b.Run("impl=gate/k="+string(rune('0'+k)), func(b *testing.B) {
			for b.Loop() {
				t, _ := g.Acquire(ctx, k-1, 1)
				t.Release()
			}
		})
	}
}
