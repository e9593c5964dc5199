package bench_test

import "testing"

// measureCPU starts measuring the CPU time the process spends and returns a
// function that reports it per operation as cpu-ns/op.
//
// The machine this suite runs on is usually shared, and other work steals
// the CPU from it at random: that inflates ns/op, which counts wall-clock
// time, but not cpu-ns/op, which counts only what this process ran. Where
// the two disagree, ns/op measured noise. cpu-ns/op includes the garbage
// collector's work and the scheduler's, and leaves out time when a P sat
// idle, so for the cases that park it is a measure of work done, not of
// latency.
func measureCPU(b *testing.B) (stop func()) {
	start, ok := processCPU()
	return func() {
		end, ok2 := processCPU()
		if ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
