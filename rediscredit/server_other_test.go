//go:build !linux

package rediscredit_test

import "syscall"

// serverAttrs has nothing to add where the kernel has no parent-death
// signal: a server whose test binary dies without cleanup is left running.
func serverAttrs() *syscall.SysProcAttr { return nil }
