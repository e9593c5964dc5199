package bench_test

import (
	"context"
	"testing"

	"golang.org/x/sync/semaphore"

	"github.com/atomicsem/atomicsem/atomicsem"
)

// BenchmarkDirect repeats the single-goroutine cases of BenchmarkUncontended
// with direct calls instead of the sem interface, so that the compiler may
// inline what it can. It shows the fast paths as a caller sees them, without
// the dynamic call every column of the other benchmarks pays.
func BenchmarkDirect(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=atomicsem/op=acquire", func(b *testing.B) {
		s, _ := atomicsem.New(1, 1)
		b.ReportAllocs()
		defer measureCPU(b)()
		for i := 0; i < b.N; i++ {
			t, err := s.Acquire(ctx, 1)
			if err != nil {
				b.Fatal(err)
			}
			t.Release()
		}
	})
	b.Run("impl=atomicsem/op=tryacquire", func(b *testing.B) {
		s, _ := atomicsem.New(1, 1)
		b.ReportAllocs()
		defer measureCPU(b)()
		for i := 0; i < b.N; i++ {
			t, ok := s.TryAcquire(1)
			if !ok {
				b.Fatal("TryAcquire failed on a free semaphore")
			}
			t.Release()
		}
	})
	b.Run("impl=xsync/op=acquire", func(b *testing.B) {
		s := semaphore.NewWeighted(1)
		b.ReportAllocs()
		defer measureCPU(b)()
		for i := 0; i < b.N; i++ {
			if err := s.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
			s.Release(1)
		}
	})
	b.Run("impl=xsync/op=tryacquire", func(b *testing.B) {
		s := semaphore.NewWeighted(1)
		b.ReportAllocs()
		defer measureCPU(b)()
		for i := 0; i < b.N; i++ {
			if !s.TryAcquire(1) {
				b.Fatal("TryAcquire failed on a free semaphore")
			}
			s.Release(1)
		}
	})
	for _, op := range []string{"acquire", "tryacquire"} {
		// floorguard, like floor, has one path for both.
		b.Run("impl=floorguard/op="+op, func(b *testing.B) {
			f, h := &floorGuardSem{}, new(held)
			f.v.Store(1)
			b.ReportAllocs()
			defer measureCPU(b)()
			for i := 0; i < b.N; i++ {
				if !f.tryAcquire(1, h) {
					b.Fatal("floorguard failed on a free semaphore")
				}
				f.release(h)
			}
		})
	}
	for _, op := range []string{"acquire", "tryacquire"} {
		// floorcas, like floor, has one path for both.
		b.Run("impl=floorcas/op="+op, func(b *testing.B) {
			f, h := &floorCASSem{}, new(held)
			f.v.Store(1)
			b.ReportAllocs()
			defer measureCPU(b)()
			for i := 0; i < b.N; i++ {
				if !f.tryAcquire(1, h) {
					b.Fatal("floorcas failed on a free semaphore")
				}
				f.release(h)
			}
		})
	}
	// tokencas is floorcas with atomicsem's call and token; wordcas adds
	// atomicsem's word and its checks; availcas checks another layout.
	// Each row calls its own concrete method: a shared loop would reach
	// them through an interface, a func value or a generic dictionary, one
	// indirect call more than the rows they are compared with.
	b.Run("impl=tokencas/op=tryacquire", func(b *testing.B) {
		s := newTokenCAS(1)
		b.ReportAllocs()
		defer measureCPU(b)()
		for i := 0; i < b.N; i++ {
			t, ok := s.tryAcquire(1)
			if !ok {
				b.Fatal("tokencas failed on a free semaphore")
			}
			t.Release()
		}
	})
	b.Run("impl=wordcas/op=tryacquire", func(b *testing.B) {
		s := newWordCAS(1, 1, 1)
		b.ReportAllocs()
		defer measureCPU(b)()
		for i := 0; i < b.N; i++ {
			t, ok := s.tryAcquire(1)
			if !ok {
				b.Fatal("wordcas failed on a free semaphore")
			}
			t.Release()
		}
	})
	// The same two with Acquire's context check before the CAS.
	b.Run("impl=tokencas/op=acquire", func(b *testing.B) {
		s := newTokenCAS(1)
		b.ReportAllocs()
		defer measureCPU(b)()
		for i := 0; i < b.N; i++ {
			t, err := s.acquire(ctx, 1)
			if err != nil {
				b.Fatal(err)
			}
			t.Release()
		}
	})
	b.Run("impl=wordcas/op=acquire", func(b *testing.B) {
		s := newWordCAS(1, 1, 1)
		b.ReportAllocs()
		defer measureCPU(b)()
		for i := 0; i < b.N; i++ {
			t, err := s.acquire(ctx, 1)
			if err != nil {
				b.Fatal(err)
			}
			t.Release()
		}
	})
	b.Run("impl=availcas/op=tryacquire", func(b *testing.B) {
		s := newAvailCAS(1, 1, 1)
		b.ReportAllocs()
		defer measureCPU(b)()
		for i := 0; i < b.N; i++ {
			t, ok := s.tryAcquire(1)
			if !ok {
				b.Fatal("availcas failed on a free semaphore")
			}
			t.Release()
		}
	})
	for _, op := range []string{"acquire", "tryacquire"} {
		// floor has one path for both.
		b.Run("impl=floor/op="+op, func(b *testing.B) {
			f, h := &floorSem{}, new(held)
			f.v.Store(1)
			b.ReportAllocs()
			defer measureCPU(b)()
			for i := 0; i < b.N; i++ {
				if !f.tryAcquire(1, h) {
					b.Fatal("floor failed on a free semaphore")
				}
				f.release(h)
			}
		})
	}
}
