package rediscreditbench_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/rediscredit"
)

// spender is what the benchmarks compare: one rate-limit decision on a key.
type spender interface {
	trySpend(ctx context.Context, key string) error
}

type credits struct{ l *rediscredit.Limiter }

func (c credits) trySpend(ctx context.Context, key string) error {
	_, err := c.l.TrySpend(ctx, key, 1)
	return err
}

// gcra is the baseline, go-redis/redis_rate: GCRA in one Lua script.
type gcra struct {
	l     *redis_rate.Limiter
	limit redis_rate.Limit
}

func (g gcra) trySpend(ctx context.Context, key string) error {
	_, err := g.l.Allow(ctx, key, g.limit)
	return err
}

// ping is the floor: a PING per call, one round trip with no script.
type ping struct{ c *redis.Client }

func (p ping) trySpend(ctx context.Context, _ string) error { return p.c.Ping(ctx).Err() }

// BenchmarkTrySpend measures one decision on a key, made by a number of
// goroutines at once through one client (a connection each), against the
// same server in the same run: ns/op is the inverse of throughput, p50-µs
// and p99-µs the latency of one call, roundtrips/op the commands sent.
// server-µs/op is the server's own time in the command per call (INFO
// commandstats' usec of EVALSHA, the commands the script calls included),
// and server-cpu-µs/op the server process's CPU time per call, parsing and
// replying included: Redis runs scripts on one thread, so these bound the
// calls a server can serve, and they do not move with the client's
// scheduling as ns/op does on a machine the client shares.
// Each goroutine spends on its own key, at a rate no call exceeds, so every
// call succeeds in both. impl=ping is the floor of a call: the round trip.
//
// bench/run.sh rediscredit runs the binary once per round, so that the
// samples of both are spread over the same stretch of time. At each
// concurrency the floor runs first, and the two implementations follow in
// an order that swaps from one round to the next (BENCH_ROUND), so that
// neither always runs first, or right after the other.
func BenchmarkTrySpend(b *testing.B) {
	srv := needServer(b)
	admin := redis.NewClient(&redis.Options{Addr: srv.addr()})
	defer admin.Close()
	order := []string{"ping", "rediscredit", "redis_rate"}
	if round, _ := strconv.Atoi(os.Getenv("BENCH_ROUND")); round%2 == 0 {
		order[1], order[2] = order[2], order[1]
	}
	for _, procs := range []int{1, 16, 64} {
		for _, name := range order {
			b.Run("impl="+name+"/goroutines="+itoa(procs), func(b *testing.B) {
				var n counter
				c := warmClient(b, srv.addr(), procs, &n)
				defer c.Close()
				var s spender
				cmd := "evalsha"
				switch name {
				case "rediscredit":
					l, err := rediscredit.New(c, 1e7, 1e6)
					require.NoError(b, err)
					s = credits{l}
				case "redis_rate":
					s = gcra{redis_rate.NewLimiter(c), redis_rate.Limit{Rate: 1e7, Burst: 1e6, Period: time.Second}}
				default:
					s, cmd = ping{c}, "ping"
				}
				run(b, s, procs, &n, admin, cmd, "bench:"+name+":")
			})
		}
	}
}

// warmClient returns a client with procs connections open, so that no
// benchmark pays for dialing.
func warmClient(b *testing.B, addr string, procs int, n *counter) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: procs, MinIdleConns: procs, ContextTimeoutEnabled: true})
	c.AddHook(n)
	deadline := time.Now().Add(5 * time.Second)
	for int(c.PoolStats().TotalConns) < procs {
		require.True(b, time.Now().Before(deadline), "the pool did not fill")
		time.Sleep(time.Millisecond)
	}
	return c
}

// run measures s; cmd is the command each call sends.
func run(b *testing.B, s spender, procs int, n *counter, admin *redis.Client, cmd, prefix string) {
	ctx := context.Background()
	for g := range procs { // warm: the script cached, the connections open
		require.NoError(b, s.trySpend(ctx, prefix+itoa(g)))
	}
	var next atomic.Int64
	lat := make([][]time.Duration, procs)
	var wg sync.WaitGroup
	require.NoError(b, admin.ConfigResetStat(ctx).Err())
	cpu0 := serverCPU(b, admin)
	n.n.Store(0)
	b.ResetTimer()
	for g := range procs {
		k := prefix + itoa(g)
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				start := time.Now()
				if err := s.trySpend(ctx, k); err != nil {
					b.Error(err)
					return
				}
				lat[g] = append(lat[g], time.Since(start))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	calls := n.n.Load()
	cpu := serverCPU(b, admin) - cpu0
	cmdCalls, cmdUsec := commandStats(b, admin, cmd)
	require.Equal(b, calls, cmdCalls, "every call is one %s", cmd)
	b.ReportMetric(float64(cmdUsec)/float64(b.N), "server-µs/op")
	b.ReportMetric(cpu.Seconds()*1e6/float64(b.N), "server-cpu-µs/op")
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds())/1e3, "p99-µs")
	}
	b.ReportMetric(float64(calls)/float64(b.N), "roundtrips/op")
}

// serverCPU returns the CPU time the server process has used (INFO cpu's
// used_cpu_user and used_cpu_sys), to the microsecond.
func serverCPU(b *testing.B, admin *redis.Client) time.Duration {
	info := infoFields(b, admin, "cpu")
	var d time.Duration
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, err := strconv.ParseFloat(info[f], 64)
		require.NoError(b, err, "INFO cpu's %s", f)
		d += time.Duration(v*1e6) * time.Microsecond
	}
	return d
}

// commandStats returns the calls of cmd since the last CONFIG RESETSTAT
// and the microseconds the server spent in them.
func commandStats(b *testing.B, admin *redis.Client, cmd string) (calls, usec int64) {
	info := infoFields(b, admin, "commandstats")
	for kv := range strings.SplitSeq(info["cmdstat_"+cmd], ",") {
		k, v, _ := strings.Cut(kv, "=")
		x, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "calls":
			calls = x
		case "usec":
			usec = x
		}
	}
	return calls, usec
}

// infoFields returns the fields of one INFO section.
func infoFields(b *testing.B, admin *redis.Client, section string) map[string]string {
	s, err := admin.Info(context.Background(), section).Result()
	require.NoError(b, err)
	m := map[string]string{}
	for line := range strings.Lines(s) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok {
			m[k] = v
		}
	}
	return m
}
