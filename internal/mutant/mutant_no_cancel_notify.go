//go:build mutant_no_cancel_notify

package mutant

// Active is the fault built into this build: NoCancelNotify.
const Active = NoCancelNotify
