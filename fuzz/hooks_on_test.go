//go:build atomicsem_hooks

package fuzz_test

import (
	"runtime"
	"sync/atomic"

	"github.com/atomicsem/atomicsem/internal/hook"
)

const hooksEnabled = true

// yieldAtHooks makes the semaphore call runtime.Gosched at some of its hook
// sites until restore is called, so that other clients run between a load of
// the state word and its compare-and-swap, between queueing and parking, and
// so on. Which calls yield is decided by hashing seed with the number of
// hook calls so far; how often (one call in 2, 4 or 8) by seed alone.
func yieldAtHooks(seed uint64) (restore func()) {
	var calls atomic.Uint64
	every := uint64(2) << (seed % 3)
	return hook.Set(func(hook.Site) {
		if mix64(seed+calls.Add(1))%every == 0 {
			runtime.Gosched()
		}
	})
}

// mix64 is the splitmix64 finalizer: a cheap hash whose low bits depend on
// every bit of its input.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
