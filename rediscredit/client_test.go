package rediscredit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/internal/faultnet"
	"github.com/atomicsem/atomicsem/rediscredit"
)

// proxied returns a proxy in front of the shared server, closed when t
// ends.
func proxied(t testing.TB) *faultnet.Proxy {
	t.Helper()
	srv := needServer(t)
	p, err := faultnet.New(srv.addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// readmeClient returns a client of addr with the options the README shows
// (every other option at go-redis's default), closed when t ends.
func readmeClient(t testing.TB, addr string, hooks ...redis.Hook) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	for _, h := range hooks {
		c.AddHook(h)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A client that would not end a call at its context's deadline is refused
// by New, naming the option; one that would is taken, and a call through
// it ends at the deadline when the server answers nothing (a black hole),
// where go-redis's defaults would wait out the 5 s read timeout.
func TestNewRefusesAClientThatIgnoresDeadlines(t *testing.T) {
	p := proxied(t)
	tests := []struct {
		name    string
		client  redis.Scripter
		refused bool
	}{
		{"Client/defaults", redis.NewClient(&redis.Options{Addr: p.Addr()}), true},
		{"Client/ContextTimeoutEnabled", redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true}), false},
		{"Client/ReadTimeout=-1", redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, ReadTimeout: -1}), false},
		{"Client/ReadTimeout=-2", redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, ReadTimeout: -2}), true},
		{"Client/WriteTimeout=-2", redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, WriteTimeout: -2}), true},
		{"ClusterClient/defaults", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{p.Addr()}}), true},
		{"ClusterClient/ContextTimeoutEnabled", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{p.Addr()}, ContextTimeoutEnabled: true}), false},
		{"ClusterClient/ReadTimeout=-2", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{p.Addr()}, ContextTimeoutEnabled: true, ReadTimeout: -2}), true},
		{"Ring/defaults", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": p.Addr()}}), true},
		{"Ring/ContextTimeoutEnabled", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": p.Addr()}, ContextTimeoutEnabled: true}), false},
		{"Ring/ReadTimeout=-2", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": p.Addr()}, ContextTimeoutEnabled: true, ReadTimeout: -2}), true},
	}
	for _, tt := range tests {
		t.Cleanup(func() { _ = tt.client.(interface{ Close() error }).Close() })
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := rediscredit.New(tt.client, 10, 10)
			if tt.refused {
				require.ErrorIs(t, err, rediscredit.ErrIgnoresDeadlines)
				require.Nil(t, l)
				return
			}
			require.NoError(t, err)
		})
	}

	// The calls of a client New takes end at their deadline with Redis
	// answering nothing.
	c := tests[1].client.(*redis.Client)
	l, err := rediscredit.New(c, 10, 10)
	require.NoError(t, err)
	_, err = l.TrySpend(context.Background(), key(t), 1)
	require.NoError(t, err)
	p.BlackHole(true)
	const deadline = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err = l.TrySpend(ctx, key(t), 1)
	took := time.Since(start)
	require.ErrorIs(t, err, rediscredit.ErrUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, took, deadline+time.Second, "go-redis's defaults wait 5 s")
}

// A request whose answer is lost (the connection resets after Redis
// applied it) is not sent again by the client, whose MaxRetries would
// otherwise retry it: Redis spent its credit once, and the call fails (or
// falls back) at once. A second application would spend twice, or, for a
// Spend giving its claim back, give back twice: mint.
func TestLostAnswerIsNotSentAgain(t *testing.T) {
	for _, open := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", open), func(t *testing.T) {
			p := proxied(t)
			var opts []rediscredit.Option
			if open {
				opts = append(opts, rediscredit.WithFallback(1))
			}
			l, err := rediscredit.New(readmeClient(t, p.Addr()), 0, 100, opts...)
			require.NoError(t, err)
			direct, err := rediscredit.New(client(t, needServer(t).addr()), 0, 100)
			require.NoError(t, err)
			k := key(t)
			require.NoError(t, client(t, needServer(t).addr()).Del(context.Background(), k).Err())
			_, err = l.TrySpend(context.Background(), k, 1)
			require.NoError(t, err)
			// The proxy counts the answer as forwarded a moment after the
			// client has it.
			require.NoError(t, p.Wait(context.Background(), func(s faultnet.Stats) bool { return s.Queued == [2]int{} }))

			p.Delay(faultnet.Down, time.Minute)
			lost := make(chan struct{})
			go func() {
				defer close(lost)
				// Redis has answered: the request was applied.
				_ = p.Wait(context.Background(), func(s faultnet.Stats) bool { return s.Queued[faultnet.Down] > 0 })
				p.Delay(faultnet.Down, 0)
				p.Reset()
				p.DiscardLate()
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			res, err := l.TrySpend(ctx, k, 1)
			took := time.Since(start)
			<-lost
			if open {
				require.NoError(t, err)
				require.True(t, res.Local)
			} else {
				require.ErrorIs(t, err, rediscredit.ErrUnavailable)
			}
			require.Less(t, took, 2*time.Second, "the call waited for its 5 s deadline")
			st, err := direct.Stats(context.Background(), k)
			require.NoError(t, err)
			require.Equal(t, int64(98), st.Balance, "Redis applied the request other than once")
		})
	}
}
