//go:build unix

package adaptivebench_test

import "syscall"

// processCPU returns the user and system CPU time, in nanoseconds, the
// process has used so far on all its threads.
func processCPU() (int64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), true
}
