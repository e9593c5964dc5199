//go:build mutant_stale

package mutant

// Active is the fault built into this build: Stale.
const Active = Stale
