package overload_test

import (
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/overload"
)

// TestThrottleFollowsTheSRERule checks the probability against the
// formula, max(0, (requests − K·accepts) / (requests + 1)), for counts on
// both sides of K·accepts and for K = 2 and 1.1.
func TestThrottleFollowsTheSRERule(t *testing.T) {
	tests := []struct {
		k                 float64
		requests, accepts int
	}{
		{2, 0, 0}, {2, 10, 10}, {2, 10, 5}, {2, 10, 4}, {2, 100, 0}, {2, 1000, 100},
		{1.1, 10, 9}, {1.1, 100, 50}, {1.1, 100, 91},
	}
	for _, tt := range tests {
		synctest.Test(t, func(t *testing.T) {
			th, err := overload.NewThrottle(tt.k, time.Minute)
			require.NoError(t, err)
			overload.SetThrottleRandForTest(th, func() float64 { return 0.999999 }) // count, never reject
			for range tt.requests {
				th.Allow()
			}
			for range tt.accepts {
				th.Accepted()
			}
			want := math.Max(0, (float64(tt.requests)-tt.k*float64(tt.accepts))/float64(tt.requests+1))
			require.InDelta(t, want, th.Probability(), 1e-12, "K %v, %d requests, %d accepts", tt.k, tt.requests, tt.accepts)
		})
	}
}

// TestThrottleRejectsWithTheProbability checks Allow's decision against a
// given random source: it rejects exactly when the draw is below the
// probability at the moment of the call.
func TestThrottleRejectsWithTheProbability(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, err := overload.NewThrottle(2, time.Minute)
		require.NoError(t, err)
		draw := 0.0
		overload.SetThrottleRandForTest(th, func() float64 { return draw })
		for range 9 {
			draw = 0.999
			require.True(t, th.Allow())
		}
		// 9 requests, none accepted: p = 9/10.
		require.InDelta(t, 0.9, th.Probability(), 1e-12)
		draw = 0.89
		require.False(t, th.Allow(), "a draw below p rejects")
		// 10 requests now: p = 10/11.
		draw = 10.0 / 11
		require.True(t, th.Allow(), "a draw at p lets through")
		// Accepts bring p to 0: every request goes.
		for range 6 {
			th.Accepted()
		}
		require.Zero(t, th.Probability())
		draw = 0
		require.True(t, th.Allow())
	})
}

// TestThrottleWindowSlides checks that counts older than the window are
// forgotten, a twentieth of the window at a time.
func TestThrottleWindowSlides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 20 * time.Second // buckets of a second
		th, err := overload.NewThrottle(2, window)
		require.NoError(t, err)
		overload.SetThrottleRandForTest(th, func() float64 { return 0.999999 })
		for range 50 {
			th.Allow()
		}
		time.Sleep(10 * time.Second)
		for range 30 {
			th.Allow()
			th.Accepted()
		}
		req, acc := th.Counts()
		require.Equal(t, uint64(80), req)
		require.Equal(t, uint64(30), acc)
		// 19 s after the first bucket it is still in the window; at 20 s
		// it has left.
		time.Sleep(9*time.Second + 999*time.Millisecond)
		req, _ = th.Counts()
		require.Equal(t, uint64(80), req)
		time.Sleep(time.Millisecond)
		req, acc = th.Counts()
		require.Equal(t, uint64(30), req)
		require.Equal(t, uint64(30), acc)
		require.Zero(t, th.Probability())
		time.Sleep(window)
		req, acc = th.Counts()
		require.Zero(t, req+acc, "everything left the window")
	})
}

// TestThrottleSettlesAtKTimesTheAccepted runs a client against a backend
// that accepts at most 100 requests a second while the client wants 1000:
// the client ends up sending about K times what is accepted.
func TestThrottleSettlesAtKTimesTheAccepted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, err := overload.NewThrottle(2, 10*time.Second)
		require.NoError(t, err)
		sent := 0
		for second := range 60 {
			accepted := 0
			sentNow := 0
			for range 1000 {
				if th.Allow() {
					sentNow++
					if accepted < 100 {
						accepted++
						th.Accepted()
					}
				}
				time.Sleep(time.Millisecond)
			}
			if second >= 30 {
				sent += sentNow
			}
		}
		perSecond := float64(sent) / 30
		require.InDelta(t, 200, perSecond, 30, "about K = 2 times the 100 accepted each second")
	})
}

func TestThrottleIsSafeForConcurrentUse(t *testing.T) {
	th, err := overload.NewThrottle(0, 0)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				if th.Allow() {
					th.Accepted()
				}
			}
		})
	}
	wg.Wait()
	req, acc := th.Counts()
	require.Equal(t, uint64(4000), req)
	require.Equal(t, uint64(4000), acc, "everything accepted: p stays 0")
}

func TestNewThrottleRefusesBadSettings(t *testing.T) {
	for _, tt := range []struct {
		k      float64
		window time.Duration
	}{{0.5, 0}, {math.NaN(), 0}, {math.Inf(1), 0}, {-1, 0}, {2, -time.Second}, {2, 19}} {
		th, err := overload.NewThrottle(tt.k, tt.window)
		require.Nil(t, th)
		require.ErrorIs(t, err, overload.ErrInvalidOption, "K %v window %v", tt.k, tt.window)
		require.Contains(t, err.Error(), "overload: ")
	}
}
