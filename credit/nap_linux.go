package credit

import (
	"syscall"
	"time"
)

// nap blocks the calling thread for up to d, at most napMax, without a
// timer of the runtime: a nanosleep, which the kernel ends within tens of
// microseconds of d. Between naps the waiter looks at its channel and
// context, so they are noticed within napMax.
func nap(d time.Duration) {
	d = min(d, napMax)
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // interrupted early: the caller looks again
}
