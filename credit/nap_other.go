//go:build !linux

package credit

import (
	"runtime"
	"time"
)

// nap yields the processor: without a way to sleep the thread for less
// than the runtime's timers resolve, the waiter spins, yielding, for the
// last stretch of its wait.
func nap(time.Duration) { runtime.Gosched() }
