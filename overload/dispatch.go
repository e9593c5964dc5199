package overload

import "time"

// Serving the queue. Whoever holds mu after a change that may let a waiter
// in (an arrival queued, a release, a cancellation, a limit change) calls
// dispatchLocked, which grants what the service order allows and then
// installs the block bits that describe the queue it leaves, in a CAS on
// the very word it decided on. A release or arrival that races it without
// the lock changes the word, fails that CAS and makes it decide again; once
// the bits are in, every release goes to the lock, and so does every
// arrival that the bits say must not overtake a waiter (W4, W5).

// dispatchLocked runs the overload mode's bookkeeping, grants waiters in
// service order while the next one fits, and sets the block bits. It
// requires that mu is held.
func (g *Gate) dispatchLocked(now time.Duration) {
	if g.codel {
		g.codelLocked(now)
	}
	for {
		old := g.load()
		if w := g.nextLocked(old, now); w != nil {
			// Does the waiter served next fit? If not, it holds back
			// every waiter behind it in the service order.
			if granted, ok := g.lay.grant(old, w.class, w.n, g.classes[w.class].ceilingAt(g.lay.limit(old))); ok {
				if g.cas(old, granted) {
					g.grantLocked(w, now)
				}
				continue
			}
		}
		if g.codel {
			// Look at the queues again as the grants left them: a queue
			// emptied now has been short since now.
			for c := range g.lay.k {
				g.queues[c].observe(now, g.target, g.interval)
			}
		}
		blocked := old.withBlocks(g.blocksLocked(old, now))
		if blocked == old || g.cas(old, blocked) {
			return
		}
	}
}

// nextLocked returns the waiter to serve next from the word w, in the
// service order documented on Gate, or nil if no waiter can be served
// whatever comes back (every queue empty, or each class at its ceiling).
// It requires that mu is held.
func (g *Gate) nextLocked(w word, now time.Duration) *waiter {
	limit := g.lay.limit(w)
	// 1. Is a reserve owed? A waiter that fits in its class's unused
	// reserve comes first, highest class first.
	for c := range g.lay.k {
		if q := &g.queues[c]; q.len > 0 && g.owedLocked(w, q.next(), limit) {
			return q.next()
		}
	}
	// 2. Does a class starve? Its oldest waiter comes next.
	for c := range g.lay.k {
		if q := &g.queues[c]; g.starvingLocked(q, now) && !g.capped(w, q.head, limit) {
			return q.head
		}
	}
	// 3. By priority, skipping classes whose next waiter is at the class's
	// ceiling: only the class's own releases can serve it. A class in the
	// overload mode holds back the classes below it even with its queue
	// empty for the moment (codelLocked sheds their waiters).
	for c := range g.lay.k {
		q := &g.queues[c]
		if q.len > 0 && !g.capped(w, q.next(), limit) {
			return q.next()
		}
		if q.sheds() {
			return nil
		}
	}
	return nil
}

// owedLocked reports whether waiter x fits in the unused reserve of its
// class at the word w. It requires that mu is held.
func (g *Gate) owedLocked(w word, x *waiter, limit int64) bool {
	return g.lay.classHeld(w, x.class)+x.n <= g.classes[x.class].reserveAt(limit)
}

// capped reports whether waiter x would take its class past its ceiling at
// the word w. A class without a MaxShare has the limit for a ceiling, so a
// waiter whose class would exceed the limit with it is capped too: only its
// own class's releases, or a higher limit, can serve it, and it must not
// hold back the classes below (as atomicsem's waiters above the limit do
// not hold back anyone).
func (g *Gate) capped(w word, x *waiter, limit int64) bool {
	return g.lay.classHeld(w, x.class)+x.n > g.classes[x.class].ceilingAt(limit)
}

// starvingLocked reports whether q's class starves at now: its oldest
// waiter has waited the starvation bound, and no waiter of the class has
// been granted for as long. It requires that mu is held.
func (g *Gate) starvingLocked(q *classQueue, now time.Duration) bool {
	bound := g.starvation
	return bound > 0 && q.len > 0 && now-q.head.arrival >= bound &&
		(!q.servedOnce || now-q.lastGrant >= bound)
}

// blocksLocked returns the block bits that describe the queues at the word
// w: which classes' arrivals must go to the lock rather than take free
// permits. It requires that mu is held.
//
// The bits follow the service order. While the gate is closed, a reserve
// is owed to a waiter or a class starves, every arrival goes to the lock,
// where it queues behind (and a closed gate refuses it). Otherwise an
// arrival of class c must not overtake a waiter of its own class (arrival
// order within a class) or a waiter of a class above that is not at its
// ceiling (priority), and must not take a permit while a class above is in
// the overload mode, which sheds the classes below it; a waiter at its
// class's ceiling can only be served by its own class's releases, so the
// classes below may pass it. The overload mode ends with time, not with an
// event: the bits it set are cleared by the first dispatch after it ends,
// at the next arrival or release (every release goes to the lock while a
// bit is set).
func (g *Gate) blocksLocked(w word, now time.Duration) word {
	if g.closed {
		return allBlocks
	}
	limit := g.lay.limit(w)
	var b word
	from := g.lay.k // the highest class that holds back the classes below
	for c := range g.lay.k {
		q := &g.queues[c]
		if q.sheds() && from == g.lay.k {
			from = c
		}
		if q.len == 0 {
			continue
		}
		if g.owedLocked(w, q.next(), limit) || g.starvingLocked(q, now) {
			return allBlocks
		}
		b |= blockBit(c)
		if from == g.lay.k && !g.capped(w, q.next(), limit) {
			from = c
		}
	}
	for c := from + 1; c < g.lay.k; c++ {
		b |= blockBit(c)
	}
	return b
}

// grantLocked ends x's wait with its permits, which the caller has just
// added to the word. It requires that mu is held.
func (g *Gate) grantLocked(x *waiter, now time.Duration) {
	q := &g.queues[x.class]
	q.lastGrant, q.servedOnce = now, true
	if x.parked {
		// The estimate of the wait learns the time between grants from
		// the queue, per permit, from grants that follow one another
		// while the queue stays non-empty.
		if g.lastGrantOK {
			sample := (now - g.lastGrant) / time.Duration(x.n)
			g.perPermit += (sample - g.perPermit) / 8
		}
		g.lastGrant, g.lastGrantOK = now, true
	}
	g.removeLocked(x)
	x.status = granted
	x.ready <- struct{}{}
}

// refuseLocked ends x's wait with the error why, counting it as a shed of
// its class if it is one. It requires that mu is held.
func (g *Gate) refuseLocked(x *waiter, why error) {
	if r, ok := reasonOf(why); ok {
		g.queues[x.class].shed[r]++
	}
	g.removeLocked(x)
	x.status, x.why = refused, why
	x.ready <- struct{}{}
}

// removeLocked takes x off its class's queue. It requires that mu is held.
func (g *Gate) removeLocked(x *waiter) {
	g.queues[x.class].remove(x)
	g.queued--
	if g.queued == 0 {
		// The estimate learns only from grants in a row of a busy queue:
		// the next grant after an idle spell says nothing of the rate.
		g.lastGrantOK = false
	}
}

// codelLocked observes each class's queue delay and applies the overload
// mode: a class in it drops its waiters that have waited more than twice
// the target, oldest first, and from the moment it enters the mode until
// its queue has stayed empty for the shed hold, every class below it is
// shed, all of its waiters dropped, unless the class holds less than its
// reserve (a shed never takes a class's guarantee). It requires that mu is
// held.
func (g *Gate) codelLocked(now time.Duration) {
	shedBelow := false
	for c := range g.lay.k {
		q := &g.queues[c]
		q.observe(now, g.target, g.interval)
		if shedBelow && q.len > 0 {
			// The counts of a class with waiters change only under mu (W5).
			w := g.load()
			if g.lay.classHeld(w, c) >= g.classes[c].reserveAt(g.lay.limit(w)) {
				for q.len > 0 {
					g.refuseLocked(q.head, ErrDropped)
				}
			}
		}
		for q.lifo && q.len > 0 && now-q.head.arrival > 2*g.target {
			g.refuseLocked(q.head, ErrDropped)
		}
		shedBelow = shedBelow || q.sheds()
	}
}
