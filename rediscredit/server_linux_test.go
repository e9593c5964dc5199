//go:build linux

package rediscredit_test

import "syscall"

// serverAttrs makes the kernel kill a server when the test binary that
// started it dies (a test timeout exits without cleanup), so that no
// server outlives its tests.
func serverAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
