package leasesim_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/rediscredit"
)

// startRedis starts a redis-server ($REDIS_SERVER, or the one on $PATH) on
// a free loopback port for t, or skips t without one.
func startRedis(t *testing.T) *redis.Client {
	t.Helper()
	bin := os.Getenv("REDIS_SERVER")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("redis-server"); err != nil {
			t.Skip("no redis-server: the model is checked against one where it is installed")
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	require.Eventually(t, func() bool { return c.Ping(context.Background()).Err() == nil }, 5*time.Second, 10*time.Millisecond)
	return c
}

// The model answers every lease and stats call as the script does, byte
// for byte, at the time Redis ran it: random calls of three leases on one
// key, with rates, bursts and holds (a few milliseconds, so that
// generations turn over) changing between calls.
func TestModelAnswersAsTheScript(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	// The Limiter loads its script into the server; the hook learns its
	// digest.
	var sha string
	c.AddHook(shaHook{&sha})
	l, err := rediscredit.New(c, 1, 1)
	require.NoError(t, err)
	_, err = l.Stats(ctx, "warm")
	require.NoError(t, err)
	require.NotEmpty(t, sha)
	m := newBackend(0)
	var redisNow float64
	m.now = func() float64 { return redisNow }
	r := rand.New(rand.NewPCG(1, 2))
	type lease struct{ mine, epoch int64 }
	calls := 0
	// A key keeps its burst and hold (as a Limiter's are fixed); the rate
	// changes between calls, as SetRate does, but for the key whose rate
	// is +Inf. (A key at +Inf whose generation Redis drops expires full at
	// once, where the model, which keeps no TTL, keeps it until its next
	// call; at +Inf both are full, but a later finite rate would tell
	// them apart.)
	for _, kc := range []struct {
		burst, hold float64
		inf         bool
	}{{100, 5, false}, {7, 1, false}, {1000, 20, false}, {1, 1000, false}, {10, 2, true}} {
		key := fmt.Sprintf("model:%v:%v:%v", kc.burst, kc.hold, kc.inf)
		var leases [3]lease
		for range 1000 {
			rate := []float64{0, 10, 1000, 1e6}[r.IntN(4)]
			switch {
			case kc.inf:
				rate = math.Inf(1)
			case r.IntN(4) > 0:
				rate = 1000
			}
			params := pack(rate, kc.burst, kc.hold)
			i := r.IntN(3)
			var args []any
			if r.IntN(5) == 0 {
				args = []any{params, "stats", int64(0)}
			} else {
				le := &leases[i]
				mine, from := le.mine, le.epoch
				if r.IntN(10) == 0 {
					// A lease that believes it holds more than Redis does, or
					// names another generation: a reservation lost.
					mine += r.Int64N(20)
					from += int64(r.IntN(3)) - 1
				}
				spent := r.Int64N(mine + 1)
				give := r.Int64N(mine - spent + 1)
				args = []any{params, "lease", r.Int64N(60), spent, give, mine, from}
			}
			got, err := c.EvalSha(ctx, sha, []string{key}, args...).Text()
			require.NoError(t, err)
			redisNow = math.Float64frombits(binary.LittleEndian.Uint64([]byte(got[24:])))
			var before bucket
			if bk := m.buckets[key]; bk != nil {
				before = *bk
			}
			want, err := m.run(key, args)
			require.NoError(t, err)
			if want != got {
				dec := func(x string) []float64 {
					var o []float64
					for k := 0; k+8 <= len(x); k += 8 {
						o = append(o, math.Float64frombits(binary.LittleEndian.Uint64([]byte(x[k:]))))
					}
					return o
				}
				t.Logf("model before %+v; gen %v; model %v redis %v", before, math.Floor(redisNow/(kc.hold*1000)), dec(want), dec(got))
			}
			require.Equal(t, want, got, "call %d on %s: %v", calls, key, args[1:])
			if args[1] == "lease" {
				w := func(k int) int64 {
					return int64(math.Float64frombits(binary.LittleEndian.Uint64([]byte(got[8*k:]))))
				}
				leases[i] = lease{mine: w(6) + w(0), epoch: w(5)}
			}
			calls++
			if r.IntN(50) == 0 {
				time.Sleep(time.Duration(r.IntN(8)) * time.Millisecond)
			}
		}
	}
	t.Logf("%d calls answered alike", calls)
}

// shaHook records the digest of the script a client runs by EVALSHA.
type shaHook struct{ sha *string }

func (h shaHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h shaHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h shaHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == "evalsha" && *h.sha == "" {
			*h.sha = fmt.Sprint(args[1])
		}
		return next(ctx, cmd)
	}
}
