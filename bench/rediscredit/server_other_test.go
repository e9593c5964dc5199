//go:build !linux

package rediscreditbench_test

import "syscall"

// serverAttrs has nothing to add where the kernel has no parent-death
// signal.
func serverAttrs() *syscall.SysProcAttr { return nil }
