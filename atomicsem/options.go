package atomicsem

import "time"

// DefaultStarvationBound is how long a parked waiter may be overtaken in
// barging mode before the semaphore switches to hand-off for it.
const DefaultStarvationBound = time.Millisecond

// An Option configures a Semaphore in New.
type Option func(*config)

type config struct {
	barging         bool
	cache           bool
	starvationBound time.Duration
}

// WithBarging lets arrivals take free permits ahead of parked waiters, for
// throughput under contention. Parked waiters are still served in FIFO order
// among themselves, and none is overtaken for longer than the starvation
// bound (DefaultStarvationBound unless WithStarvationBound says otherwise).
// See the Semaphore documentation for the policy.
func WithBarging() Option {
	return func(c *config) { c.barging = true }
}

// WithStarvationBound sets how long a parked waiter may be overtaken in
// barging mode before the semaphore hands permits to it directly. A bound
// of zero or less means the default. The option has no effect without
// WithBarging.
func WithStarvationBound(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.starvationBound = d
		}
	}
}
