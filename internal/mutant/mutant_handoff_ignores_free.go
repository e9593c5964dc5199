//go:build mutant_handoff_ignores_free

package mutant

// Active is the fault built into this build: HandOffIgnoresFree.
const Active = HandOffIgnoresFree
