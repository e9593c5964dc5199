//go:build mutant_no_spin

package mutant

// Active is the fault built into this build: NoSpin.
const Active = NoSpin
