//go:build mutant_recycle_granted

package mutant

// Active is the fault built into this build: RecycleGranted.
const Active = RecycleGranted
