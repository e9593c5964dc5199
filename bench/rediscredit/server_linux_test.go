//go:build linux

package rediscreditbench_test

import "syscall"

// serverAttrs makes the kernel kill the server when the test binary dies.
func serverAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
