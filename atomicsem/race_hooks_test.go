//go:build atomicsem_hooks

package atomicsem_test

import (
	"math/rand/v2"
	"runtime"

	"github.com/atomicsem/atomicsem/internal/hook"
)

// In the hooks build, the token races yield at half the hook sites, chosen
// at random, so that a goroutine often loses the processor between a load of
// the state word and its CAS, or between being woken and returning.
func init() {
	installRaceHook = func() func() {
		return hook.Set(func(hook.Site) {
			if rand.IntN(2) == 0 {
				runtime.Gosched()
			}
		})
	}
}
