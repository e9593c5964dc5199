package adaptivebench_test

import (
	"testing"
	"time"

	"github.com/atomicsem/atomicsem/atomicsem"
)

// BenchmarkAcquireRecord measures the per-request overhead of an adaptive
// limiter: admit a request without waiting and record it as a success,
// which feeds the controller. The bounds (at least 100, starting at 500)
// keep every limiter far above the requests in flight, so that no request
// is refused and the controllers' decisions are all the work measured
// beside the admission.
//
// case=serial runs one goroutine; case=parallel runs GOMAXPROCS goroutines
// on one limiter. impl=floor is no limiter but the work every request of
// package adaptive cannot avoid (see floorAdmitter): serially, a limiter's
// own cost is its figure less the floor's. In parallel the floor is the
// cost of the semaphore's shared word alone.
//
// Besides ns/op, which counts wall-clock time, each reports cpu-ns/op, the
// CPU time the process used per request: on a shared machine other work
// inflates the first and not the second (see bench/cputime_test.go).
func BenchmarkAcquireRecord(b *testing.B) {
	for _, p := range append(peers[:len(peers):len(peers)], peer{name: "floor", bench: newFloor}) {
		b.Run("impl="+p.name+"/case=serial", func(b *testing.B) {
			a := p.bench(100, 1000, 500)
			b.ReportAllocs()
			defer measureCPU(b)()
			for b.Loop() {
				if !a.admitRecord() {
					b.Fatal("refused")
				}
			}
		})
		b.Run("impl="+p.name+"/case=parallel", func(b *testing.B) {
			a := p.bench(100, 1000, 500)
			b.ReportAllocs()
			defer measureCPU(b)()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !a.admitRecord() {
						b.Error("refused")
						return
					}
				}
			})
		})
	}
}

// measureCPU starts measuring the CPU time the process spends and returns a
// function that reports it per operation as cpu-ns/op.
func measureCPU(b *testing.B) (stop func()) {
	start, ok := processCPU()
	return func() {
		end, ok2 := processCPU()
		if ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// floorAdmitter does what package adaptive must do for every request, and
// nothing else: take and return a slot of an atomicsem.Semaphore, read the
// requests in flight from it, and read the monotonic clock at the admission
// and at the end. The sample goes nowhere: no controller runs, and nothing
// hands the sample over.
type floorAdmitter struct {
	sem   *atomicsem.Semaphore
	epoch time.Time
}

func newFloor(_, max, initial int) admitter {
	return &floorAdmitter{sem: atomicsem.MustNew(int64(initial), int64(max)), epoch: time.Now()}
}

func (f *floorAdmitter) admitRecord() bool {
	tok, ok := f.sem.TryAcquire(1)
	if !ok {
		return false
	}
	inFlight := f.sem.Held()
	start := time.Since(f.epoch)
	rtt := time.Since(f.epoch) - start
	tok.Release()
	return rtt >= 0 || inFlight < 0 // always true; the reads stay
}
