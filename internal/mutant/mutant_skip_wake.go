//go:build mutant_skip_wake

package mutant

// Active is the fault built into this build: SkipWake.
const Active = SkipWake
