package overload

import (
	"github.com/atomicsem/atomicsem/token"
)

// owner is what the gate's tokens return their permits to: the gate itself,
// under a type of its own so that no caller can call its methods and return
// permits it never acquired. The tag a token carries is its class.
type owner Gate

func (o *owner) ReturnPermits(n int64, tag uint32) {
	if g := (*Gate)(o); !g.releaseFast(int(tag), n) {
		g.releaseSlow(int(tag), n)
	}
}
func (o *owner) ForgetPermits(n int64, tag uint32) { (*Gate)(o).forget(int(tag), n) }

// SplitPermits keeps both parts with the gate and the class: the gate keeps
// no books per token.
func (o *owner) SplitPermits(_, _ int64, tag uint32) (token.Owner, uint32) { return o, tag }

// release returns n permits of class c: one CAS while nobody is queued,
// else under the lock, where the dispatch hands them on.
func (g *Gate) release(c int, n int64) {
	if !g.releaseFast(c, n) {
		g.releaseSlow(c, n)
	}
}

// releaseFast returns n permits of class c in one CAS if no block bit is
// set (nobody is queued, W4) and the class holds them, and reports whether
// it did.
func (g *Gate) releaseFast(c int, n int64) bool {
	// c < MaxClasses, which the mask tells the compiler; and n ≤ max, so
	// that n permits fit a field: the class holds them iff its field,
	// masked in place, is at least the n units it gives back.
	cc := &g.classes[c&(MaxClasses-1)]
	units := word(n) * cc.unit
	for {
		old := g.load()
		if old.blocks() != 0 || old&cc.field < units {
			return false
		}
		if g.cas(old, old-units) {
			return true
		}
	}
}

// releaseSlow returns n permits of class c under the lock and serves the
// waiters they admit.
func (g *Gate) releaseSlow(c int, n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.changeLocked(c, n, (*layout).release)
}

// forget returns n permits of class c and lowers the limit by as many.
func (g *Gate) forget(c int, n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.changeLocked(c, n, (*layout).forget)
}

// changeLocked applies a release or a forget of n permits of class c in a
// CAS loop, then dispatches. A class that holds fewer than n permits means
// a token was ended twice through a copy: it panics before changing
// anything. It requires that mu is held.
func (g *Gate) changeLocked(c int, n int64, change func(*layout, word, int, int64) (word, bool)) {
	for {
		old := g.load()
		next, ok := change(&g.lay, old, c, n)
		if !ok {
			panic("overload: released more permits of a class than its tokens hold (was a token copied?)")
		}
		if g.cas(old, next) {
			break
		}
	}
	g.dispatchLocked(g.now())
}
