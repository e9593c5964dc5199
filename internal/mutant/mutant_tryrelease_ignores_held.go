//go:build mutant_tryrelease_ignores_held

package mutant

// Active is the fault built into this build: TryReleaseIgnoresHeld.
const Active = TryReleaseIgnoresHeld
