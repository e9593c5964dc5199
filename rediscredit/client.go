package rediscredit

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// checkClient returns an error matching ErrIgnoresDeadlines if client is
// a go-redis client whose options say that it would not end a call at its
// context's deadline: ContextTimeoutEnabled off (the socket then waits for
// ReadTimeout, 5 s by default, whatever the deadline), or a ReadTimeout or
// WriteTimeout of -2 (no socket deadline at all). A client of another type
// is taken as it is: its deadlines are its own.
func checkClient(client redis.Scripter) error {
	var on bool
	var read, write time.Duration
	none := time.Duration(-2) // the timeout that sets no socket deadline
	switch c := client.(type) {
	case *redis.Client:
		if c == nil {
			return nil
		}
		o := c.Options()
		on, read, write = o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout
		none = -1 // a Client's options hold -2 as -1, and -1 (no timeout) as 0
	case *redis.ClusterClient:
		if c == nil {
			return nil
		}
		o := c.Options()
		on, read, write = o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout
	case *redis.Ring:
		if c == nil {
			return nil
		}
		o := c.Options()
		on, read, write = o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout
	default:
		return nil
	}
	switch {
	case !on:
		return fmt.Errorf("%w: set ContextTimeoutEnabled in its options", ErrIgnoresDeadlines)
	case read == none || write == none:
		return fmt.Errorf("%w: its ReadTimeout or WriteTimeout of -2 sets no socket deadline", ErrIgnoresDeadlines)
	}
	return nil
}
