//go:build mutant_nonatomic

package mutant

// Active is the fault built into this build: NonAtomic.
const Active = NonAtomic
