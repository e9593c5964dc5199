// Package hook names the points in the semaphore's code where a test may
// interleave other goroutines: between the load of the state word and its
// compare-and-swap, between queueing a waiter and parking it, between a
// waiter's wake-up and its return, before a dispatch takes the queue lock,
// between a hand-off and the wake-up it sends after the lock, in a barging
// arrival's spin, and between a FIFO arrival's look at the queue and the
// lock it takes to join it.
//
// In normal builds At is an empty function that the compiler removes. Built
// with the tag atomicsem_hooks, At calls the function installed by Set, so a
// test can yield, sleep or block at an exact point (see hook_on.go).
package hook

// Site names a hook point.
type Site uint8

const (
	// BeforeCAS sits between a load of the state word and the
	// compare-and-swap that depends on it, or, in a dispatch that
	// needs no compare-and-swap, the step that commits its decision.
	BeforeCAS Site = iota
	// BeforePark sits after a waiter is queued and before it blocks.
	BeforePark
	// AfterWake sits after a waiter is woken and before it returns.
	AfterWake
	// BeforeDispatch sits after an operation saw parked waiters and before
	// it takes the queue lock to serve them.
	BeforeDispatch
	// Spin sits in a barging arrival's spin before the queue, at the start
	// of each try.
	Spin
	// BeforeWake sits after a release has granted the front waiter its
	// permits and released the queue lock, and before it wakes that
	// waiter.
	BeforeWake
	// BeforeQueue sits after a FIFO arrival saw, without the lock, that a
	// queued waiter fits under the limit, and before it takes the queue
	// lock to queue behind it.
	BeforeQueue

	numSites
)

var siteNames = [numSites]string{
	BeforeCAS:      "BeforeCAS",
	BeforePark:     "BeforePark",
	AfterWake:      "AfterWake",
	BeforeDispatch: "BeforeDispatch",
	Spin:           "Spin",
	BeforeWake:     "BeforeWake",
	BeforeQueue:    "BeforeQueue",
}

// String returns the site's name.
func (s Site) String() string {
	if s < numSites {
		return siteNames[s]
	}
	return "Site(?)"
}
