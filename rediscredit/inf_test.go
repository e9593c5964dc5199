package rediscredit_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/rediscredit"
)

// A rate of +Inf is no limit, as in package credit: the bucket is full at
// every call, less what is reserved, and a change of rate to it and back
// keeps the laws.
func TestInfiniteRateIsNoLimit(t *testing.T) {
	srv := needServer(t)
	c := client(t, srv.addr())
	ctx := context.Background()
	k := key(t)
	require.NoError(t, c.Del(ctx, k).Err())
	l, err := rediscredit.New(c, 1, 3)
	require.NoError(t, err)
	res, err := l.TrySpend(ctx, k, 3)
	require.NoError(t, err)
	require.True(t, res.OK)

	require.NoError(t, l.SetRate(math.Inf(1)))
	for range 3 {
		res, err = l.TrySpend(ctx, k, 3)
		require.NoError(t, err)
		require.True(t, res.OK)
		require.Equal(t, int64(3), res.Balance, "full again at once")
	}
	r, res, err := l.TryReserve(ctx, k, 2)
	require.NoError(t, err)
	require.True(t, res.OK)
	require.Equal(t, [2]int64{1, 2}, [2]int64{res.Balance, res.Reserved})
	res, err = l.TrySpend(ctx, k, 2)
	require.NoError(t, err)
	require.False(t, res.OK, "reserved credit counts against the burst")
	require.Equal(t, time.Duration(-1), res.Wait, "accrual never covers credit held by a reservation")
	res, err = l.Spend(ctx, k, 1)
	require.NoError(t, err)
	require.True(t, res.OK)
	_, err = r.Release(ctx)
	require.NoError(t, err)
	n, err := c.Exists(ctx, k).Result()
	require.NoError(t, err)
	require.Zero(t, n, "a full bucket with nothing reserved is deleted")

	require.NoError(t, l.SetRate(1))
	res, err = l.TrySpend(ctx, k, 3)
	require.NoError(t, err)
	require.True(t, res.OK, "full when the rate comes back")
	res, err = l.TrySpend(ctx, k, 1)
	require.NoError(t, err)
	require.False(t, res.OK)
	require.Positive(t, res.Wait)
}
