package overload_test

import (
	"context"
	"time"

	"github.com/atomicsem/atomicsem/overload"
)

// model is the gate as the package documentation describes it, written
// without the word, the block bits' encoding or linked lists: slices,
// recomputed from scratch at every step. The fuzz target drives a Gate and
// a model with the same operations in a testing/synctest bubble and
// compares them after every step.
//
// Shares are kept as the documentation says, in 2^-32ths of the limit:
// class c's reserve at limit L is ⌈S_c·L⌉ − ⌈S_{c−1}·L⌉ with S_c the
// cumulative share, its ceiling ⌈MaxShare·L⌉.
type model struct {
	k          int
	limit      int64
	cum        []int64 // cumulative shares, in 2^-32ths
	maxShare   []int64 // in 2^-32ths; 2^32 means no ceiling below the limit
	maxQueue   int
	maxWait    time.Duration
	codel      bool
	target     time.Duration
	interval   time.Duration
	starvation time.Duration

	held   []int64
	queues [][]*mWaiter // oldest first
	lifo   []bool
	above  []bool
	since  []time.Duration // when the delay went above the target
	below  []bool
	bSince []time.Duration // when the delay went to or below the target
	shedOn []bool          // the class sheds those below
	empty  []bool
	eSince []time.Duration // when the queue was last seen to empty
	served []bool
	lastG  []time.Duration // the class's last grant under the lock
	shed   [][4]uint64     // queue full, max wait, dropped, deadline
	closed bool
	// blocks is the block bits as the last dispatch left them (the fast
	// paths read them, not a recomputation: a class can start to starve
	// between two dispatches).
	blocks []bool

	perPermit   time.Duration
	lastGrant   time.Duration
	lastGrantOK bool

	// grantedNow collects the waiters granted or refused by the step, for
	// the harness.
	events []mEvent
}

type mWaiter struct {
	id       int
	class    int
	n        int64
	arrival  time.Duration
	deadline time.Duration // absolute, on the bubble's clock since start; 0 if none
	parked   bool
}

type mEvent struct {
	id  int
	err error // nil: granted
}

const one = 1 << 32

func ceilShare(s, l int64) int64 { return (s*l + one - 1) / one }

func (m *model) reserve(c int) int64 {
	prev := int64(0)
	if c > 0 {
		prev = m.cum[c-1]
	}
	return ceilShare(m.cum[c], m.limit) - ceilShare(prev, m.limit)
}

func (m *model) ceiling(c int) int64 {
	if m.maxShare[c] >= one {
		return m.limit
	}
	return ceilShare(m.maxShare[c], m.limit)
}

func (m *model) total() int64 {
	var t int64
	for _, h := range m.held {
		t += h
	}
	return t
}

func (m *model) fits(w *mWaiter) bool {
	return m.total()+w.n <= m.limit && m.held[w.class]+w.n <= m.ceiling(w.class)
}

func (m *model) capped(w *mWaiter) bool { return m.held[w.class]+w.n > m.ceiling(w.class) }

func (m *model) owed(w *mWaiter) bool { return m.held[w.class]+w.n <= m.reserve(w.class) }

func (m *model) next(c int) *mWaiter {
	q := m.queues[c]
	if m.lifo[c] {
		return q[len(q)-1]
	}
	return q[0]
}

func (m *model) last(c int) *mWaiter {
	q := m.queues[c]
	if m.lifo[c] {
		return q[0]
	}
	return q[len(q)-1]
}

func (m *model) starving(c int, now time.Duration) bool {
	q := m.queues[c]
	return m.starvation > 0 && len(q) > 0 && now-q[0].arrival >= m.starvation &&
		(!m.served[c] || now-m.lastG[c] >= m.starvation)
}

func (m *model) queued() int {
	n := 0
	for _, q := range m.queues {
		n += len(q)
	}
	return n
}

func (m *model) remove(w *mWaiter) {
	q := m.queues[w.class]
	for i, x := range q {
		if x == w {
			m.queues[w.class] = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if m.queued() == 0 {
		m.lastGrantOK = false
	}
}

func (m *model) refuse(w *mWaiter, err error) {
	switch err {
	case overload.ErrQueueFull:
		m.shed[w.class][0]++
	case overload.ErrMaxWait:
		m.shed[w.class][1]++
	case overload.ErrDropped:
		m.shed[w.class][2]++
	case overload.ErrDeadline:
		m.shed[w.class][3]++
	}
	m.remove(w)
	m.events = append(m.events, mEvent{w.id, err})
}

func (m *model) grant(w *mWaiter, now time.Duration) {
	m.held[w.class] += w.n
	m.served[w.class], m.lastG[w.class] = true, now
	if w.parked {
		if m.lastGrantOK {
			sample := (now - m.lastGrant) / time.Duration(w.n)
			m.perPermit += (sample - m.perPermit) / 8
		}
		m.lastGrant, m.lastGrantOK = now, true
	}
	m.remove(w)
	m.events = append(m.events, mEvent{w.id, nil})
}

// pick returns the waiter the service order serves next, or nil.
func (m *model) pick(now time.Duration) *mWaiter {
	for c := range m.k {
		if len(m.queues[c]) > 0 && m.owed(m.next(c)) {
			return m.next(c)
		}
	}
	for c := range m.k {
		if m.starving(c, now) && !m.capped(m.queues[c][0]) {
			return m.queues[c][0]
		}
	}
	for c := range m.k {
		if len(m.queues[c]) > 0 && !m.capped(m.next(c)) {
			return m.next(c)
		}
		if m.sheds(c, now) {
			return nil
		}
	}
	return nil
}

func (m *model) dispatch(now time.Duration) {
	if m.codel {
		shed := false
		for c := range m.k {
			m.observe(c, now)
			if shed && len(m.queues[c]) > 0 && m.held[c] >= m.reserve(c) {
				for len(m.queues[c]) > 0 {
					m.refuse(m.queues[c][0], overload.ErrDropped)
				}
			}
			for m.lifo[c] && len(m.queues[c]) > 0 && now-m.queues[c][0].arrival > 2*m.target {
				m.refuse(m.queues[c][0], overload.ErrDropped)
			}
			shed = shed || m.sheds(c, now)
		}
	}
	for {
		w := m.pick(now)
		if w == nil || !m.fits(w) {
			break
		}
		m.grant(w, now)
	}
	if m.codel {
		for c := range m.k {
			m.observe(c, now)
		}
	}
	m.setBlocks(now)
}

// observe takes class c's queue delay at now into its overload mode.
func (m *model) observe(c int, now time.Duration) {
	var delay time.Duration
	switch {
	case len(m.queues[c]) > 0:
		delay = now - m.queues[c][0].arrival
		m.empty[c] = false
	case !m.empty[c]:
		m.empty[c], m.eSince[c] = true, now
	case now-m.eSince[c] >= shedHoldIntervals*m.interval:
		m.shedOn[c] = false
	}
	if delay > m.target {
		m.below[c] = false
		if !m.above[c] {
			m.above[c], m.since[c] = true, now
		} else if now-m.since[c] >= m.interval {
			m.lifo[c], m.shedOn[c] = true, true
		}
		return
	}
	m.above[c] = false
	if !m.below[c] {
		m.below[c], m.bSince[c] = true, now
	} else if now-m.bSince[c] >= m.interval {
		m.lifo[c] = false
	}
}

// shedHoldIntervals is the shed hold of the package documentation, in
// intervals.
const shedHoldIntervals = 4

// sheds reports whether class c sheds the classes below: from its overload
// mode's start until its queue has stayed empty for the shed hold.
func (m *model) sheds(c int, _ time.Duration) bool { return m.shedOn[c] }

func (m *model) setBlocks(now time.Duration) {
	all := m.closed
	from := m.k
	b := make([]bool, m.k)
	for c := range m.k {
		if m.sheds(c, now) && from == m.k {
			from = c
		}
		if len(m.queues[c]) == 0 {
			continue
		}
		if m.owed(m.next(c)) || m.starving(c, now) {
			all = true
		}
		b[c] = true
		if from == m.k && !m.capped(m.next(c)) {
			from = c
		}
	}
	for c := from + 1; c < m.k; c++ {
		b[c] = true
	}
	for c := range b {
		b[c] = b[c] || all
	}
	m.blocks = b
}

func (m *model) anyBlock() bool {
	for _, b := range m.blocks {
		if b {
			return true
		}
	}
	return false
}

// fast reports whether an arrival of class c for n takes the fast path, and
// takes it.
func (m *model) fast(c int, n int64) bool {
	if m.blocks[c] || m.total()+n > m.limit || m.held[c]+n > m.ceiling(c) {
		return false
	}
	m.held[c] += n
	return true
}

// arrive is an Acquire that missed the fast path. It returns the waiter,
// queued or decided (its event is then in m.events).
func (m *model) arrive(w *mWaiter, now time.Duration) {
	if m.closed {
		m.events = append(m.events, mEvent{w.id, overload.ErrClosed})
		return
	}
	if m.queued() == 0 && m.perPermit != 0 && now-m.lastGrant >= overload.EstimateMemory {
		m.perPermit = 0
	}
	w.arrival = now
	m.queues[w.class] = append(m.queues[w.class], w)
	m.dispatch(now)
	if !m.isQueued(w) {
		return // served, or shed below a class in the overload mode
	}
	var why error
	evicted := false
	if m.maxQueue > 0 && m.queued() > m.maxQueue {
		for c := m.k - 1; c > w.class; c-- {
			if len(m.queues[c]) > 0 {
				m.refuse(m.last(c), overload.ErrQueueFull)
				evicted = true
				break
			}
		}
		if !evicted {
			why = overload.ErrQueueFull
		}
	}
	if why == nil && m.perPermit != 0 {
		var ahead int64
		for c := range w.class {
			for _, x := range m.queues[c] {
				ahead += x.n
			}
		}
		if !m.lifo[w.class] {
			for _, x := range m.queues[w.class] {
				if x != w {
					ahead += x.n
				}
			}
		}
		expected := time.Duration(ahead+w.n) * m.perPermit
		switch {
		case w.deadline != 0 && w.deadline-now < expected:
			why = overload.ErrDeadline
		case m.maxWait > 0 && m.maxWait < expected:
			why = overload.ErrMaxWait
		}
	}
	if why != nil {
		m.refuse(w, why)
	}
	if why != nil || evicted {
		m.dispatch(now)
	}
	if why == nil {
		w.parked = true
	}
}

func (m *model) isQueued(w *mWaiter) bool {
	for _, x := range m.queues[w.class] {
		if x == w {
			return true
		}
	}
	return false
}

// withdraw is a waiter's context or maximum wait ending its wait at now.
func (m *model) withdraw(w *mWaiter, why error, now time.Duration) {
	if !m.isQueued(w) {
		return
	}
	m.refuse(w, why)
	m.dispatch(now)
}

// release returns n permits of class c: fast while no block bit is set.
func (m *model) release(c int, n int64, now time.Duration) {
	m.held[c] -= n
	if m.anyBlock() {
		m.dispatch(now)
	}
}

func (m *model) setLimit(l int64, now time.Duration) {
	if m.closed {
		return
	}
	m.limit = l
	m.dispatch(now)
}

func (m *model) close() {
	if m.closed {
		return
	}
	m.closed = true
	for c := range m.k {
		for len(m.queues[c]) > 0 {
			m.refuse(m.queues[c][0], overload.ErrClosed)
		}
	}
	m.setBlocks(0)
}

// timers returns the next moment after from and at most to when a waiter's
// maximum wait or deadline ends its wait, the waiter and why, or ok false.
func (m *model) timer(from, to time.Duration) (at time.Duration, w *mWaiter, why error, ok bool) {
	for _, q := range m.queues {
		for _, x := range q {
			if !x.parked {
				continue
			}
			if m.maxWait > 0 {
				if t := x.arrival + m.maxWait; t > from && t <= to && (!ok || t < at) {
					at, w, why, ok = t, x, overload.ErrMaxWait, true
				}
			}
			if x.deadline != 0 {
				if t := x.deadline; t > from && t <= to && (!ok || t < at) {
					at, w, why, ok = t, x, context.DeadlineExceeded, true
				}
			}
		}
	}
	return at, w, why, ok
}

func (m *model) queueIDs() [][]int {
	out := make([][]int, m.k)
	for c, q := range m.queues {
		for _, w := range q {
			out[c] = append(out[c], w.id)
		}
	}
	return out
}

// idle is Gate.Idle as its documentation states it, the look at the
// gate it takes included.
func (m *model) idle(now time.Duration) bool {
	if m.closed || m.queued() != 0 || m.total() != 0 {
		return false
	}
	if m.perPermit != 0 && now-m.lastGrant < overload.EstimateMemory {
		return false
	}
	m.dispatch(now)
	for c := range m.k {
		if m.above[c] || m.lifo[c] || m.shedOn[c] || m.blocks[c] {
			return false
		}
	}
	return true
}
