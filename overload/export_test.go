package overload

// ReleaseForTest returns n permits of class c as a token's Release does,
// for the test of a release through a copied token.
func (g *Gate) ReleaseForTest(c int, n int64) { g.release(c, n) }

// SetThrottleRandForTest replaces the random source of t's decisions.
func SetThrottleRandForTest(t *Throttle, rand func() float64) { t.rand = rand }

// LockHeldForTest reports whether g's lock is held: a harness whose check
// failed asks before it closes g, since a goroutine blocked on a mutex for
// ever keeps a synctest bubble from ending.
func LockHeldForTest(g *Gate) bool {
	if g.mu.TryLock() {
		g.mu.Unlock()
		return false
	}
	return true
}
