//go:build mutant_handoff_keeps_eligible

package mutant

// Active is the fault built into this build: HandOffKeepsEligible.
const Active = HandOffKeepsEligible
