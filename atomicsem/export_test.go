package atomicsem

import "fmt"

// QueueFlagsError checks invariants I6 and I9 of the state word (see
// internal/state): with the queue lock free, the queue state is queued or
// higher iff the queue is non-empty, eligible or higher iff a queued waiter
// asks for no more than the limit and, in barging mode unless starving, no
// woken waiter is on its way; the idle flag is set iff WaitIdle callers
// wait, and never with nothing held; and the word's own invariants
// (CheckInvariants). It returns a description of the first mismatch, or ""
// if there is none. It takes the lock, so it sees the queue between two
// operations.
func QueueFlagsError(s *Semaphore) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.load()
	eligible := false
	for q := s.queue.head; q != nil; q = q.next {
		eligible = eligible || q.want() <= w.Limit()
	}
	eligible = eligible && (w.Starving() || s.queue.woken == 0)
	switch {
	case s.queue.woken < 0 || (!s.barging() && s.queue.woken != 0):
		return fmt.Sprintf("%d woken waiters on their way", s.queue.woken)
	case w.Queued() != !s.queue.empty():
		return "queued flag disagrees with the queue"
	case w.Eligible() != eligible:
		return "eligible flag disagrees with the queue and the limit"
	case w.Idle() != (len(s.idle.chans) > 0):
		return "idle flag disagrees with the WaitIdle callers"
	case w.Idle() && w.Held() == 0:
		return "idle flag set with no permit held"
	}
	return w.CheckInvariants(s.max)
}

// WordStats returns the fields of Stats that come from the state word,
// leaving Waiters zero, without the queue lock that Stats takes: for a test
// that has stopped a goroutine at a hook while it holds the lock.
func WordStats(s *Semaphore) Stats {
	return s.statsOf(s.load(), 0)
}

// LockQueue takes the semaphore's queue lock and returns the function that
// releases it, so that a test can show that a call does not need it.
func LockQueue(s *Semaphore) (unlock func()) {
	s.mu.Lock()
	return s.mu.Unlock
}

// FreeListError checks the free list of waiter records: no record listed
// twice (two parked Acquires would then share one record and its event) and
// a length that matches the count. It returns a description of the first
// problem, or "" if there is none. It takes the queue lock.
func FreeListError(s *Semaphore) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[*waiter]bool)
	for _, head := range []*waiter{s.free.head, s.free.spill.Load()} {
		for w := head; w != nil; w = w.next {
			if seen[w] {
				return "a waiter record is on the free list twice"
			}
			seen[w] = true
		}
	}
	if want := s.free.len + int(s.free.spillLen.Load()); len(seen) != want {
		return fmt.Sprintf("%d records on the free list, but its lengths say %d", len(seen), want)
	}
	return ""
}

// ForceSpinning makes barging arrivals spin before they queue, as they do on
// a machine with more than one CPU, until restore is called; for a test that
// must see the spin on any machine.
func ForceSpinning() (restore func()) {
	old := multicore
	multicore = true
	return func() { multicore = old }
}

// QueueState returns the word's queue state, by name: "empty", "queued",
// "eligible" or "starving", without the queue lock.
func QueueState(s *Semaphore) string {
	return [...]string{"empty", "queued", "eligible", "starving"}[s.load().Queue()]
}
