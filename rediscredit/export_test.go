package rediscredit

// FallbackKeys returns the number of keys whose local buckets l's
// fallback holds, and its cap on them.
func FallbackKeys(l *Limiter) (n int, maxKeys int64) {
	l.local.mu.Lock()
	defer l.local.mu.Unlock()
	return len(l.local.keys), l.local.maxKeys
}

// AbandonLease stops le's goroutine and drops its pool without a word to
// Redis, as a process that dies does: its reservation stays there.
func AbandonLease(le *Lease) {
	le.mu.Lock()
	le.closed = true
	le.mu.Unlock()
	close(le.quit)
	<-le.exited
	le.pool.Load().Close()
}
