package rediscredit

// FallbackKeys returns the number of keys whose local buckets l's
// fallback holds, and its cap on them.
func FallbackKeys(l *Limiter) (n int, maxKeys int64) {
	l.local.mu.Lock()
	defer l.local.mu.Unlock()
	return len(l.local.keys), l.local.maxKeys
}
