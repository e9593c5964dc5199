package bench_test

import (
	"runtime/metrics"
	"testing"
)

// measureSched starts counting goroutine switches and time spent waiting
// for locks, and returns a function that reports both per operation:
//
//   - switches/op: how often a goroutine was put back on a P, from the
//     runtime's /sched/latencies:seconds histogram. The runtime records one
//     in eight of each goroutine's trips off its P, so the count times
//     eight is an estimate; for a FIFO semaphore whose every acquire parks
//     it reads 1.00, and what it reads beyond 1 is goroutines parked on a
//     lock as well.
//   - lockwait-ns/op: /sync/mutex/wait/total:seconds, the time goroutines
//     spent blocked on a sync.Mutex or spinning or sleeping on a runtime
//     lock (such as a channel's).
func measureSched(b *testing.B) (stop func()) {
	startSwitches, startWait := schedCounters()
	return func() {
		switches, wait := schedCounters()
		if b.N > 0 {
			b.ReportMetric(8*(switches-startSwitches)/float64(b.N), "switches/op")
			b.ReportMetric(1e9*(wait-startWait)/float64(b.N), "lockwait-ns/op")
		}
	}
}

func schedCounters() (switches, lockWait float64) {
	s := []metrics.Sample{
		{Name: "/sched/latencies:seconds"},
		{Name: "/sync/mutex/wait/total:seconds"},
	}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindFloat64Histogram {
		for _, n := range s[0].Value.Float64Histogram().Counts {
			switches += float64(n)
		}
	}
	if s[1].Value.Kind() == metrics.KindFloat64 {
		lockWait = s[1].Value.Float64()
	}
	return switches, lockWait
}
