package keyed

import "fmt"

// CheckDue returns an error if a shard of l breaks what makeRoom relies
// on: every entry is in its shard's heap, at its place, the heap is
// ordered, dueTop is its head, and every entry's due is at or before the
// moment it can be dropped (now, for one that can be dropped now).
func CheckDue(l *Limiter) error {
	now := l.cfg.Now()
	for i := range l.t.shards {
		s := &l.t.shards[i]
		s.mu.Lock()
		err := checkShardDue(l, s, now)
		s.mu.Unlock()
		if err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
	}
	return nil
}

func checkShardDue(l *Limiter, s *shard[*limEntry], now int64) error {
	if len(s.due) != len(s.m) {
		return fmt.Errorf("%d entries, %d in the heap", len(s.m), len(s.due))
	}
	if s.dueTop.Load() != s.due.top() {
		return fmt.Errorf("dueTop %d, head %d", s.dueTop.Load(), s.due.top())
	}
	for k, e := range s.m {
		if e.key != k || int(e.pos) >= len(s.due) || s.due[e.pos] != e {
			return fmt.Errorf("entry %q is not in the heap at its place", k)
		}
		if p := (int(e.pos) - 1) / 2; e.pos > 0 && s.due[p].due > e.due {
			return fmt.Errorf("entry %q is due before its parent", k)
		}
		when := l.dueOf(s, e, now)
		if l.idle(s, k, e) {
			when = now
		}
		if e.due > max(when, now) {
			return fmt.Errorf("entry %q is due at %d, after it can be dropped (%d)", k, e.due, when)
		}
	}
	return nil
}
