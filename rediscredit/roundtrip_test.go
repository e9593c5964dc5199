package rediscredit_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/rediscredit"
)

// Every call is one round trip once the server holds the script; the first
// call after the server lost it (here: SCRIPT FLUSH) is two, EVALSHA and
// then EVAL. So it is through a client and through a bare redis.Scripter.
func TestOneRoundTripPerCall(t *testing.T) {
	for _, bare := range []bool{false, true} {
		t.Run(fmt.Sprintf("scripter=%v", bare), func(t *testing.T) {
			srv := needServer(t)
			var n counter
			c := client(t, srv.addr(), &n)
			var s redis.Scripter = c
			if bare {
				s = scripter{c}
			}
			oneRoundTripPerCall(t, c, s, &n)
		})
	}
}

func oneRoundTripPerCall(t *testing.T, c *redis.Client, s redis.Scripter, n *counter) {
	ctx := context.Background()
	require.NoError(t, c.ScriptFlush(ctx).Err())
	l, err := rediscredit.New(s, 1e6, 1000)
	require.NoError(t, err)
	k := key(t)

	n.n.Store(0)
	_, err = l.TrySpend(ctx, k, 1)
	require.NoError(t, err)
	require.Equal(t, int64(2), n.n.Load(), "the first call after a flush: EVALSHA, then EVAL")

	calls := []func() error{
		func() error { _, err := l.TrySpend(ctx, k, 1); return err },
		func() error { _, err := l.Spend(ctx, k, 1); return err },
		func() error { _, err := l.Stats(ctx, k); return err },
		func() error {
			r, _, err := l.TryReserve(ctx, k, 2)
			if err == nil {
				_, err = r.Settle(ctx, 1)
			}
			return err
		},
	}
	n.n.Store(0)
	n.pipelines.Store(0)
	for range 250 {
		for _, call := range calls {
			require.NoError(t, call())
		}
	}
	require.Equal(t, int64(1250), n.n.Load(), "1000 calls and 250 settles")
	require.Zero(t, n.pipelines.Load())
}

// A bucket's key exists only while it is not full (or holds reservations):
// a full bucket is never written, and a spent one expires when it would be
// full again, so idle keys cost nothing.
func TestIdleKeysExpire(t *testing.T) {
	srv := needServer(t)
	c := client(t, srv.addr())
	ctx := context.Background()
	l, err := rediscredit.New(c, 100, 5, rediscredit.WithHold(300*time.Millisecond))
	require.NoError(t, err)
	k := key(t)
	require.NoError(t, c.Del(ctx, k).Err())

	res, err := l.Stats(ctx, k)
	require.NoError(t, err)
	require.Equal(t, int64(5), res.Balance, "a missing key is a full bucket")
	require.Equal(t, time.Duration(-2), ttl(t, c, k), "looking at a full bucket wrote its key")

	_, err = l.TrySpend(ctx, k, 3) // full again 30ms on
	require.NoError(t, err)
	d := ttl(t, c, k)
	require.Greater(t, d, time.Duration(0))
	require.LessOrEqual(t, d, 32*time.Millisecond)
	require.Eventually(t, func() bool { return ttl(t, c, k) == -2 }, time.Second, 5*time.Millisecond)

	// A reservation keeps the key for the hold even when it is full.
	r, res, err := l.TryReserve(ctx, k, 2)
	require.NoError(t, err)
	require.True(t, res.OK)
	d = ttl(t, c, k)
	require.Greater(t, d, 250*time.Millisecond)
	require.LessOrEqual(t, d, 300*time.Millisecond)
	res, err = r.Release(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(5), res.Balance)
	require.Equal(t, time.Duration(-2), ttl(t, c, k), "a full bucket with nothing reserved is deleted")

	// A million buckets used once and left idle cost nothing once full:
	// here a thousand, at a rate that fills each in 10ms.
	for i := range 1000 {
		_, err := l.TrySpend(ctx, k+":"+itoa(i), 1)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		ks, err := c.Keys(ctx, k+":*").Result()
		require.NoError(t, err)
		return len(ks) == 0
	}, 2*time.Second, 10*time.Millisecond)
}

// A key that holds something else is refused with Redis's reply, not as
// unavailable, and left as it was.
func TestForeignValueIsRefused(t *testing.T) {
	srv := needServer(t)
	c := client(t, srv.addr())
	ctx := context.Background()
	l, err := rediscredit.New(c, 1, 1)
	require.NoError(t, err)
	k := key(t)
	require.NoError(t, c.Set(ctx, k, "hello", time.Minute).Err())
	_, err = l.TrySpend(ctx, k, 1)
	require.ErrorContains(t, err, "does not hold a credit bucket")
	require.NotErrorIs(t, err, rediscredit.ErrUnavailable)
	v, err := c.Get(ctx, k).Result()
	require.NoError(t, err)
	require.Equal(t, "hello", v)
}

// A reservation settles once: a second Settle, or one outside [0, Credit],
// panics and changes nothing; a Settle that fails leaves it open.
func TestReservationSettlesOnce(t *testing.T) {
	srv := needServer(t)
	c := client(t, srv.addr())
	ctx := context.Background()
	l, err := rediscredit.New(c, 1, 10)
	require.NoError(t, err)
	k := key(t)
	require.NoError(t, c.Del(ctx, k).Err())
	r, res, err := l.TryReserve(ctx, k, 4)
	require.NoError(t, err)
	require.True(t, res.OK)
	require.Equal(t, int64(4), r.Credit())
	require.PanicsWithValue(t, "rediscredit: settling 5 credits of a reservation of 4", func() { _, _ = r.Settle(ctx, 5) })
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = r.Settle(done, 1)
	require.Equal(t, context.Canceled, err)
	res, err = r.Settle(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, [2]int64{9, 0}, [2]int64{res.Balance, res.Reserved}, "1 spent, 3 given back")
	require.PanicsWithValue(t, "rediscredit: a reservation was settled twice", func() { _, _ = r.Release(ctx) })
	res, err = l.Stats(ctx, k)
	require.NoError(t, err)
	require.Equal(t, [2]int64{9, 0}, [2]int64{res.Balance, res.Reserved})
}

// A rate so low that a bucket takes longer to fill than any TTL Redis
// takes still gets one, and the bucket works.
func TestTinyRateKeepsAValidTTL(t *testing.T) {
	srv := needServer(t)
	c := client(t, srv.addr())
	ctx := context.Background()
	l, err := rediscredit.New(c, 1e-30, 3)
	require.NoError(t, err)
	k := key(t)
	require.NoError(t, c.Del(ctx, k).Err())
	res, err := l.TrySpend(ctx, k, 2)
	require.NoError(t, err)
	require.True(t, res.OK)
	require.Greater(t, ttl(t, c, k), 24*time.Hour)
	res, err = l.TrySpend(ctx, k, 2)
	require.NoError(t, err)
	require.False(t, res.OK)
	require.Greater(t, res.Wait, 24*time.Hour)
}

// The largest finite rate refills a bucket at every call.
func TestHugeRateRefillsAtOnce(t *testing.T) {
	srv := needServer(t)
	c := client(t, srv.addr())
	ctx := context.Background()
	l, err := rediscredit.New(c, math.MaxFloat64, 3)
	require.NoError(t, err)
	k := key(t)
	for range 5 {
		res, err := l.TrySpend(ctx, k, 3)
		require.NoError(t, err)
		require.True(t, res.OK)
	}
	require.NoError(t, l.SetRate(1))
	res, err := l.Stats(ctx, k)
	require.NoError(t, err)
	require.Equal(t, int64(3), res.Balance)
}
