//go:build mutant_lose_on_cancel

package mutant

// Active is the fault built into this build: LoseOnCancel.
const Active = LoseOnCancel
