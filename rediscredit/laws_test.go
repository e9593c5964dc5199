package rediscredit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/credittest"
	"github.com/atomicsem/atomicsem/rediscredit"
)

// bucket adapts one key of a Limiter to the law suite. Its clock is the
// server's: every time it reports is the TIME the script read, as a
// duration since the Unix epoch.
type bucket struct {
	t   *testing.T
	l   *rediscredit.Limiter
	key string
}

func at(res rediscredit.Result) time.Duration {
	return time.Duration(res.Time.UnixMicro()) * time.Microsecond
}

func (b *bucket) TrySpend(n int64) (bool, time.Duration) {
	res, err := b.l.TrySpend(context.Background(), b.key, n)
	require.NoError(b.t, err)
	return res.OK, at(res)
}

func (b *bucket) Spend(ctx context.Context, n int64) (time.Duration, error) {
	res, err := b.l.Spend(ctx, b.key, n)
	if err != nil {
		return 0, err
	}
	return at(res), nil
}

func (b *bucket) TryReserve(n int64) (credittest.Reservation, bool, time.Duration) {
	r, res, err := b.l.TryReserve(context.Background(), b.key, n)
	require.NoError(b.t, err)
	return &reservation{b: b, r: r}, res.OK, at(res)
}

func (b *bucket) Stats() (int64, int64, time.Duration) {
	res, err := b.l.Stats(context.Background(), b.key)
	require.NoError(b.t, err)
	return res.Balance, res.Reserved, at(res)
}

// SetRate changes the Limiter's rate, which a key takes at its next call:
// the Stats call here, whose time is the time of the change.
func (b *bucket) SetRate(rate float64) time.Duration {
	require.NoError(b.t, b.l.SetRate(rate))
	_, _, t := b.Stats()
	return t
}

type reservation struct {
	b *bucket
	r *rediscredit.Reservation
}

func (r *reservation) Release() time.Duration {
	res, err := r.r.Release(context.Background())
	require.NoError(r.b.t, err)
	return at(res)
}

func (r *reservation) Forget() time.Duration {
	res, err := r.r.Forget(context.Background())
	require.NoError(r.b.t, err)
	return at(res)
}

// scripter hides every method of a client but redis.Scripter's, as a
// wrapper of the user's might.
type scripter struct{ redis.Scripter }

// The Redis backend keeps credit's laws, checked on the server's clock,
// through a client (which the Limiter sends typed commands through) and
// through a bare redis.Scripter (which it calls Script.Run on).
func TestLaws(t *testing.T) {
	srv := needServer(t)
	c := client(t, srv.addr())
	tests := []struct {
		name   string
		client redis.Scripter
	}{
		{"client", c},
		{"scripter", scripter{c}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			credittest.Run(t, credittest.Config{
				New: func(t *testing.T, rate float64, burst int64) credittest.Bucket {
					l, err := rediscredit.New(tt.client, rate, burst)
					require.NoError(t, err)
					k := key(t)
					require.NoError(t, c.Del(context.Background(), k).Err())
					return &bucket{t: t, l: l, key: k}
				},
			})
		})
	}
}
