//go:build mutant_requeue_front

package mutant

// Active is the fault built into this build: RequeueFront.
const Active = RequeueFront
