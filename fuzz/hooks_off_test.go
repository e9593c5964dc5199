//go:build !atomicsem_hooks

package fuzz_test

const hooksEnabled = false

// yieldAtHooks does nothing in this build: hook sites are compiled out.
// Build with -tags atomicsem_hooks to widen the interleavings.
func yieldAtHooks(uint64) (restore func()) { return func() {} }
