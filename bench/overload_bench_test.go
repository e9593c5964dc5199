package bench_test

import (
	"context"
	"testing"
	"unsafe"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/overload"
	"github.com/atomicsem/atomicsem/token"
)

// admitter is what BenchmarkGateAdmission calls: atomicsem and the
// overload gate alike, through the same dynamic call, so that the cost of
// the call is the same in every column. Every implementation is a pointer
// with pointer methods, so that each call lands on its method directly:
// a value method of a struct wider than a pointer is reached through a
// wrapper the compiler writes, which would charge one column an extra call.
type admitter interface {
	acquire(ctx context.Context, h *admitted) error
	tryAcquire(h *admitted) bool
	release(h *admitted)
}

// admitted records one admission, padded to 128 bytes as held is (see
// impls_test.go), so that goroutines' records never share a cache line.
type admitted struct {
	tok token.Token
	_   [128 - unsafe.Sizeof(token.Token{})]byte
}

type semAdmitter struct{ s *atomicsem.Semaphore }

func (a *semAdmitter) acquire(ctx context.Context, h *admitted) (err error) {
	h.tok, err = a.s.Acquire(ctx, 1)
	return err
}
func (a *semAdmitter) tryAcquire(h *admitted) (ok bool) { h.tok, ok = a.s.TryAcquire(1); return ok }
func (a *semAdmitter) release(h *admitted)              { h.tok.Release() }

type gateAdmitter struct {
	g     *overload.Gate
	class int
}

func (a *gateAdmitter) acquire(ctx context.Context, h *admitted) (err error) {
	h.tok, err = a.g.Acquire(ctx, a.class, 1)
	return err
}
func (a *gateAdmitter) tryAcquire(h *admitted) (ok bool) {
	h.tok, ok = a.g.TryAcquire(a.class, 1)
	return ok
}
func (a *gateAdmitter) release(h *admitted) { h.tok.Release() }

// gateImpls are the columns of BenchmarkGateAdmission: atomicsem, the
// baseline, and the gate with one, two and four classes, each admitting
// its lowest class, which in the last has a ceiling, so that the fast path
// makes every check it can make.
func gateImpls(limit int64) []struct {
	name string
	a    admitter
} {
	four := []overload.Class{{Name: "a", Share: 0.25}, {Name: "b", Share: 0.25}, {Name: "c"}, {Name: "d", MaxShare: 0.5}}
	return []struct {
		name string
		a    admitter
	}{
		{"atomicsem", &semAdmitter{atomicsem.MustNew(limit, limit)}},
		{"gate-1", &gateAdmitter{overload.MustNew(limit, limit, []overload.Class{{Name: "a"}}), 0}},
		{"gate-2", &gateAdmitter{overload.MustNew(limit, limit, []overload.Class{{Name: "a", Share: 0.5}, {Name: "b"}}), 1}},
		{"gate-4", &gateAdmitter{overload.MustNew(limit, limit, four), 3}},
	}
}

// BenchmarkGateAdmission measures what priority admission adds to an
// uncontended acquire of the same limit: one goroutine taking and
// returning one permit of a limit of 1 (op=acquire, op=tryacquire), and,
// for the record, two goroutines on a limit far above their number
// (op=parallel), where the word's cache line moves between cores.
func BenchmarkGateAdmission(b *testing.B) {
	for _, im := range gateImpls(1) {
		b.Run("impl="+im.name+"/op=acquire", func(b *testing.B) {
			ctx, h := context.Background(), new(admitted)
			b.ReportAllocs()
			defer measureCPU(b)()
			for i := 0; i < b.N; i++ {
				if err := im.a.acquire(ctx, h); err != nil {
					b.Fatal(err)
				}
				im.a.release(h)
			}
		})
		b.Run("impl="+im.name+"/op=tryacquire", func(b *testing.B) {
			h := new(admitted)
			b.ReportAllocs()
			defer measureCPU(b)()
			for i := 0; i < b.N; i++ {
				if !im.a.tryAcquire(h) {
					b.Fatal("tryAcquire failed on a free limit")
				}
				im.a.release(h)
			}
		})
	}
	for _, im := range gateImpls(1024) {
		b.Run("impl="+im.name+"/op=parallel", func(b *testing.B) {
			b.ReportAllocs()
			defer measureCPU(b)()
			b.RunParallel(func(pb *testing.PB) {
				ctx, h := context.Background(), new(admitted)
				for pb.Next() {
					if err := im.a.acquire(ctx, h); err != nil {
						b.Error(err)
						return
					}
					im.a.release(h)
				}
			})
		})
	}
}
