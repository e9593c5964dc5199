//go:build mutant_double_release

package mutant

// Active is the fault built into this build: DoubleRelease.
const Active = DoubleRelease
