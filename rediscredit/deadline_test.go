package rediscredit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/internal/faultnet"
	"github.com/atomicsem/atomicsem/rediscredit"
)

// A way for Redis to be down, as a proxy in front of it shows it to the
// client: every connection refused, every byte swallowed, or every
// connection reset as soon as it carries a request.
type outage struct {
	name  string
	start func(t *testing.T, p *faultnet.Proxy) (stop func())
}

var outages = []outage{
	{"refused", func(t *testing.T, p *faultnet.Proxy) func() {
		require.NoError(t, p.Refuse(true))
		p.Reset()
		return func() { require.NoError(t, p.Refuse(false)) }
	}},
	{"black-holed", func(t *testing.T, p *faultnet.Proxy) func() {
		p.BlackHole(true)
		return func() { p.BlackHole(false); p.Reset() }
	}},
	{"reset", func(t *testing.T, p *faultnet.Proxy) func() {
		return resetEveryRequest(p)
	}},
}

// resetEveryRequest makes p reset each connection as soon as its client
// sends anything, until the returned function is called.
func resetEveryRequest(p *faultnet.Proxy) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	p.Hold()
	go func() {
		defer close(done)
		for p.Wait(ctx, func(s faultnet.Stats) bool { return s.Held > 0 }) == nil {
			p.Reset()
			p.DiscardLate()
		}
	}()
	return func() {
		cancel()
		<-done
		p.Release()
		p.Reset()
		p.DiscardLate()
	}
}

// trips is a go-redis hook that records the last script call (EVALSHA or
// EVAL): when it began and ended, and the deadline it ran under.
type trips struct {
	mu                     sync.Mutex
	began, ended, deadline time.Time
}

func (h *trips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		began := time.Now()
		dl, _ := ctx.Deadline()
		err := next(ctx, cmd)
		h.mu.Lock()
		h.began, h.ended, h.deadline = began, time.Now(), dl
		h.mu.Unlock()
		return err
	}
}

func (h *trips) last() (began, ended, deadline time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.began, h.ended, h.deadline
}

// With Redis down, a call with a 50 ms deadline ends at it: a Limiter that
// fails closed returns ErrUnavailable (matching context.DeadlineExceeded
// too when the deadline ended the round trip), and one that falls back
// decides locally before the deadline, its round trip having run under a
// deadline a fifth of the time left earlier. The client has the options
// the README shows.
//
// The round trip's own deadline is checked on every call. A loaded
// machine can wake the client after its deadline by more than the
// fallback's fifth, so the decision is required before the deadline on
// every call whose round trip ended by its own deadline (a millisecond
// late at most), and on at least one call of each case; the count is
// logged. A fail-closed call must end within a second of its deadline
// (stalls of a third of a second were seen at load average 10; go-redis's
// defaults wait 5 s). Each case makes 12 calls, 12 a second of
// $REDISCREDIT_FAULTS if set.
func TestRedisDownDecidesWithinTheDeadline(t *testing.T) {
	const deadline = 50 * time.Millisecond
	calls := int(12 * faultsDuration(t).Seconds())
	for _, o := range outages {
		for _, open := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fallback=%v", o.name, open), func(t *testing.T) {
				p := proxied(t)
				var h trips
				c := readmeClient(t, p.Addr(), &h)
				var opts []rediscredit.Option
				if open {
					opts = append(opts, rediscredit.WithFallback(0.5))
				}
				l, err := rediscredit.New(c, 1000, 1000, opts...)
				require.NoError(t, err)
				k := key(t)
				res, err := l.TrySpend(context.Background(), k, 1)
				require.NoError(t, err)
				require.False(t, res.Local)

				stop := o.start(t, p)
				defer stop()
				ops := []func(context.Context) (rediscredit.Result, error){
					func(ctx context.Context) (rediscredit.Result, error) { return l.TrySpend(ctx, k, 1) },
					func(ctx context.Context) (rediscredit.Result, error) { return l.Spend(ctx, k, 1) },
					func(ctx context.Context) (rediscredit.Result, error) {
						r, res, err := l.TryReserve(ctx, k, 1)
						if r != nil {
							_, _ = r.Release(ctx)
						}
						return res, err
					},
				}
				var slowest time.Duration
				inTime := 0
				for i := range calls {
					ctx, cancel := context.WithTimeout(context.Background(), deadline)
					dl, _ := ctx.Deadline()
					start := time.Now()
					res, err := ops[i%len(ops)](ctx)
					took := time.Since(start)
					cancel()
					slowest = max(slowest, took)
					began, ended, tripDeadline := h.last()
					require.False(t, began.Before(start), "call %d made no round trip", i)
					if !open {
						require.ErrorIs(t, err, rediscredit.ErrUnavailable, "call %d", i)
						if took >= deadline {
							require.ErrorIs(t, err, context.DeadlineExceeded, "call %d", i)
						}
						require.Equal(t, dl, tripDeadline, "call %d: the round trip ran under another deadline", i)
						require.Less(t, took, deadline+time.Second, "call %d: ErrUnavailable long after the deadline", i)
						continue
					}
					// The round trip's deadline is dl − (dl − t)/5 for the t
					// at which the call made it, between start and began.
					require.False(t, tripDeadline.Before(dl.Add(-dl.Sub(start)/5)), "call %d", i)
					require.False(t, tripDeadline.After(dl.Add(-dl.Sub(began)/5)), "call %d: the round trip left the fallback less than a fifth", i)
					if err == nil {
						require.True(t, res.Local, "call %d", i)
					} else {
						// A Spend whose deadline has passed when its round
						// trip ends does not wait for local credit.
						require.ErrorIs(t, err, rediscredit.ErrUnavailable, "call %d", i)
						require.ErrorIs(t, err, context.DeadlineExceeded, "call %d", i)
					}
					if err == nil && res.Time.Before(dl) {
						inTime++
					} else {
						require.False(t, ended.Before(tripDeadline.Add(time.Millisecond)),
							"call %d: the round trip ended %v before the deadline, and the fallback did not decide before it (%v)",
							i, dl.Sub(ended), err)
					}
				}
				if open {
					t.Logf("%d calls, %d decided before the deadline, the slowest returned after %v", calls, inTime, slowest)
					require.Positive(t, inTime, "the fallback decided after the deadline on every call")
				} else {
					t.Logf("%d calls, the slowest returned after %v", calls, slowest)
				}
			})
		}
	}
}
