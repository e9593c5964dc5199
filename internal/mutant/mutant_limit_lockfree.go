//go:build mutant_limit_lockfree

package mutant

// Active is the fault built into this build: LimitLockFree.
const Active = LimitLockFree
