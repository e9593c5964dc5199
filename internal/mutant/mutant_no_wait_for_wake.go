//go:build mutant_no_wait_for_wake

package mutant

// Active is the fault built into this build: NoWaitForWake.
const Active = NoWaitForWake
