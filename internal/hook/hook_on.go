//go:build atomicsem_hooks

package hook

import "sync/atomic"

// Enabled reports whether this build calls hooks.
const Enabled = true

var installed atomic.Pointer[func(Site)]

// At calls the installed hook function, if any, with the site's name.
func At(s Site) {
	if f := installed.Load(); f != nil {
		(*f)(s)
	}
}

// Set installs f as the hook function (nil removes it) and returns a
// function that restores the previous one. Tests call it before starting
// the goroutines under test and restore it after they have all finished.
func Set(f func(Site)) (restore func()) {
	var p *func(Site)
	if f != nil {
		p = &f
	}
	prev := installed.Swap(p)
	return func() { installed.Store(prev) }
}
