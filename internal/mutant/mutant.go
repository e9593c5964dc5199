// Package mutant names the deliberate faults that the mutation self-check
// (scripts/mutants.sh) builds into the library, one build tag each, to show
// that the test suite catches every one of them.
//
// Active is the fault this build carries: "" in every normal build, or one
// of the names below when the package is built with the tag mutant_<name>.
// Library code tests it against a name, as in
//
//	if mutant.Active == mutant.NonAtomic { ... }
//
// Both sides are constants, so in a normal build the condition is false at
// compile time and the compiler removes the branch and its body: the faults
// cost nothing where they are not built in.
package mutant

// The faults, one per build tag mutant_<name>.
const (
	// NonAtomic makes the state word's compare-and-swap a load, a compare
	// and a separate store, so concurrent updates can be lost.
	NonAtomic = "nonatomic"
	// Stale makes Forget write back the total it had before the permits
	// were removed.
	Stale = "stale"
	// TryReleaseIgnoresHeld makes TryRelease check count + n ≤ max instead
	// of total + n ≤ max, forgetting the permits that tokens hold.
	TryReleaseIgnoresHeld = "tryrelease_ignores_held"
	// SkipWake makes a token's Release return its permits without serving
	// the parked waiters.
	SkipWake = "skip_wake"
	// LoseOnCancel makes a cancelled Acquire whose permits were granted in
	// the race keep them instead of passing them on.
	LoseOnCancel = "lose_on_cancel"
	// NoCancelNotify makes a cancelled waiting Acquire leave the queue
	// without serving the waiters behind it.
	NoCancelNotify = "no_cancel_notify"
	// DoubleRelease lets a token be released or forgotten more than once.
	DoubleRelease = "double_release"
	// DropClosed makes every change of held clear the closed flag.
	DropClosed = "drop_closed"
	// EligibleNotSet makes a waiter that fits under the limit queue
	// without setting the eligible flag, so arrivals can overtake it.
	EligibleNotSet = "eligible_not_set"
	// LimitLockFree makes limit changes skip the queue lock even with
	// waiters queued, so the eligible flag goes stale and the waiters a
	// raised limit admits are not served.
	LimitLockFree = "limit_lockfree"
	// RecycleGranted makes a parked Acquire that was granted its permits
	// put its waiter record back on the free list at once, while its token
	// still carries the record and will put it back again on Release.
	RecycleGranted = "recycle_granted"
	// RequeueFront makes a woken waiter that lost its permits to an
	// arrival (barging mode) go back to the front of the queue instead of
	// its place by arrival.
	RequeueFront = "requeue_front"
	// NoSpin makes a barging arrival that finds the permits taken go to
	// the queue lock at once instead of spinning for them first.
	NoSpin = "no_spin"
	// HandOffKeepsEligible makes a FIFO release hand its permits to the
	// front waiter without a walk of the queue even when nobody left behind
	// it fits under the limit, so the eligible flag stays set.
	HandOffKeepsEligible = "handoff_keeps_eligible"
	// HandOffIgnoresFree makes a FIFO release hand its permits to the front
	// waiter without a walk of the queue even when permits were free
	// before, so the waiters those would serve stay parked.
	HandOffIgnoresFree = "handoff_ignores_free"
	// NoWaitForWake makes a cancelled Acquire that was granted its permits
	// by a release that has yet to wake it pass them on without waiting for
	// that wake-up, which then lands on the recycled record.
	NoWaitForWake = "no_wait_for_wake"
)

// All lists every fault. scripts/mutants.sh runs one per mutant_*.go file,
// and this package's test checks that each has its file.
var All = []string{
	NonAtomic, Stale, TryReleaseIgnoresHeld, SkipWake,
	LoseOnCancel, NoCancelNotify, DoubleRelease, DropClosed,
	EligibleNotSet, LimitLockFree, RecycleGranted, RequeueFront,
	NoSpin, HandOffKeepsEligible, HandOffIgnoresFree, NoWaitForWake,
}
