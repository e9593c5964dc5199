package etcdsem_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// The recovery bound, measured. A holder that crashes keeps its permits
// until its lease runs out: the lease was last renewed up to a third of
// the TTL before the crash (the client renews it three times per TTL), and
// etcd looks for leases that have run out every 500 ms, so the waiter is
// granted between two thirds of the TTL and the TTL plus half a second
// after the crash, plus the time etcd takes to revoke the lease and the
// waiter to hear of it and grant itself. The documented bound is the TTL
// plus one second (docs/fleet.md).
//
// After a restart, the member that becomes leader renews every lease for
// its TTL plus an election timeout, so the bound counts from the server
// being ready, plus the time the waiter's client takes to reconnect.
//
// TestRecoveryTimes runs ETCDSEM_RECOVERY trials of each and prints one
// line per trial; bench/recovery.sh runs it on a quiet and a loaded
// machine and keeps the lines in bench/results/etcdsem-recovery.txt.

// recoveryBound is the documented bound beyond the TTL.
const recoveryBound = time.Second

// envInt returns the integer in the environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, name)
	return n
}

// TestRecoveryTimes measures the time from a holder's crash to its
// waiter's grant (crash), from the server's restart to the grant
// (restart), ETCDSEM_RECOVERY trials of each at a lease of
// ETCDSEM_RECOVERY_TTL seconds (default 2), and how long the server takes
// to stop with its clients connected and with them cut off (stop, up to
// ten trials: each connected one takes seconds). It fails if a trial
// passes the documented bound.
func TestRecoveryTimes(t *testing.T) {
	trials := envInt(t, "ETCDSEM_RECOVERY", 0)
	if trials == 0 {
		t.Skip("ETCDSEM_RECOVERY=trials measures the recovery bound")
	}
	ttl := envInt(t, "ETCDSEM_RECOVERY_TTL", 2)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	t.Run("crash", func(t *testing.T) { recoveryAfterCrash(t, trials, ttl, rng) })
	t.Run("restart", func(t *testing.T) { recoveryAfterRestart(t, trials, ttl, rng) })
	t.Run("stop", func(t *testing.T) { serverStopTimes(t, min(trials, 10)) })
}

// fastReconnect is a dial option for a client that retries its connection
// within half a second, instead of gRPC's default backoff (from 1 s,
// growing 1.6 times per try up to 2 minutes).
var fastReconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 500 * time.Millisecond},
	MinConnectTimeout: time.Second,
})

// crashTrial is one trial's fixture: a holder of the only permit, behind
// the server's proxy if it has one, and a waiter.
type crashTrial struct {
	holder, waiter *handle
	p              *pendingAcquire
}

// newCrashTrial opens a semaphore of limit 1 under prefix with a holder of
// lease ttl seconds that takes the permit and a waiter that waits for it.
func newCrashTrial(t *testing.T, srv *server, prefix string, ttl int) *crashTrial {
	ct := &crashTrial{
		holder: newHandle(t, srv, prefix, 1, 1, handleOpts{ttl: ttl}),
		waiter: newHandle(t, srv, prefix, 0, 1, handleOpts{dial: []grpc.DialOption{fastReconnect}}),
	}
	_, err := ct.holder.Acquire(testCtx(t), 1) // never released
	require.NoError(t, err)
	ct.p = goAcquire(testCtx(t), ct.waiter.Semaphore, 1)
	awaitWaiters(t, ct.waiter.Semaphore, 1)
	return ct
}

// granted waits for the waiter's grant, gives the permit back, closes the
// trial's clients, and returns when the grant came.
func (ct *crashTrial) granted(t *testing.T) time.Time {
	ct.p.wait(t)
	require.NoError(t, ct.p.err)
	ct.p.tok.Release()
	closeSession(ct.waiter.cli, ct.waiter.session)
	ct.waiter.cli.Close()
	return ct.p.at
}

// recoveryAfterCrash measures, trials times, the time from a holder's
// crash to the grant of its waiter: the crash falls at a random point of
// the lease's renewal cycle.
func recoveryAfterCrash(t *testing.T, trials, ttl int, rng *rand.Rand) {
	srv := startServer(t)
	var took []time.Duration
	for i := range trials {
		ct := newCrashTrial(t, srv, fmt.Sprintf("%s%d/", prefixFor(t), i), ttl)
		time.Sleep(time.Duration(rng.Int64N(int64(ttl) * int64(time.Second))))
		crashed := time.Now()
		ct.holder.cli.Close()
		d := ct.granted(t).Sub(crashed)
		took = append(took, d)
		t.Logf("recovery kind=crash ttl=%ds trial=%d crash_to_grant=%.3fs", ttl, i+1, d.Seconds())
	}
	summarize(t, "crash", "crash_to_grant", took, time.Duration(ttl)*time.Second+recoveryBound)
}

// recoveryAfterRestart measures, trials times, the time from the server
// being ready after a restart to the grant of a waiter whose holder
// crashed just before the server stopped.
func recoveryAfterRestart(t *testing.T, trials, ttl int, rng *rand.Rand) {
	srv := startServerBehindProxy(t)
	var took []time.Duration
	for i := range trials {
		ct := newCrashTrial(t, srv, fmt.Sprintf("%s%d/", prefixFor(t), i), ttl)
		time.Sleep(time.Duration(rng.Int64N(int64(ttl) * int64(time.Second) / 3)))
		crashed := time.Now()
		ct.holder.cli.Close()
		srv.cut() // the clients' connections are cut at once, so the server stops at once
		srv.stop()
		stopped := time.Since(crashed)
		srv.start()
		ready := time.Now()
		srv.heal()
		d := ct.granted(t).Sub(ready)
		took = append(took, d)
		t.Logf("recovery kind=restart ttl=%ds trial=%d stop=%.3fs ready_to_grant=%.3fs", ttl, i+1, stopped.Seconds(), d.Seconds())
	}
	// Leases renewed at the election: the TTL plus an election timeout
	// (100 ms here), then the expiry check, the revocation, and the
	// waiter's reconnection (at most 500 ms apart here).
	summarize(t, "restart", "ready_to_grant", took, time.Duration(ttl)*time.Second+recoveryBound+time.Second/2)
}

// serverStopTimes measures how long the server takes to stop while a
// waiter, a holder and their sessions are connected, and with their
// connections cut first: the server waits for its clients' streams to
// end.
func serverStopTimes(t *testing.T, trials int) {
	srv := startServerBehindProxy(t)
	var connected, cut []time.Duration
	for i := range trials {
		ct := newCrashTrial(t, srv, fmt.Sprintf("%s%d/", prefixFor(t), i), 10)
		start := time.Now()
		if i%2 == 1 {
			srv.cut()
		}
		srv.stop()
		d := time.Since(start)
		srv.start()
		srv.heal()
		closeSession(ct.holder.cli, ct.holder.session) // the waiter is granted
		ct.granted(t)
		ct.holder.cli.Close()
		kind := "connected"
		if i%2 == 1 {
			kind, cut = "cut", append(cut, d)
		} else {
			connected = append(connected, d)
		}
		t.Logf("recovery kind=stop clients=%s trial=%d stop=%.3fs", kind, i+1, d.Seconds())
	}
	summarize(t, "stop, clients connected", "stop", connected, 0)
	summarize(t, "stop, clients cut", "stop", cut, 0)
}

// summarize logs the distribution of took and, if bound is not zero,
// checks every trial against it and logs the margin.
func summarize(t *testing.T, kind, what string, took []time.Duration, bound time.Duration) {
	if len(took) == 0 {
		return
	}
	s := slices.Sorted(slices.Values(took))
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	line := fmt.Sprintf("summary kind=%q %s: n=%d min=%.3fs median=%.3fs p90=%.3fs max=%.3fs",
		kind, what, len(s), s[0].Seconds(), q(0.5).Seconds(), q(0.9).Seconds(), s[len(s)-1].Seconds())
	if bound > 0 {
		line += fmt.Sprintf(" bound=%.3fs margin=%.3fs", bound.Seconds(), (bound - s[len(s)-1]).Seconds())
	}
	t.Log(line)
	if bound > 0 {
		require.LessOrEqual(t, s[len(s)-1], bound, "%s: a trial passed the documented bound", kind)
	}
}
