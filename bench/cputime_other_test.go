//go:build !unix

package bench_test

import "time"

// processCPU is not available on this platform; cpu-ns/op is then not
// reported.
func processCPU() (time.Duration, bool) { return 0, false }
