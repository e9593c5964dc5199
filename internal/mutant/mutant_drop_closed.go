//go:build mutant_drop_closed

package mutant

// Active is the fault built into this build: DropClosed.
const Active = DropClosed
