//go:build mutant_eligible_not_set

package mutant

// Active is the fault built into this build: EligibleNotSet.
const Active = EligibleNotSet
