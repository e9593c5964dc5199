package etcdsem_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/etcdsem"
	"github.com/atomicsem/atomicsem/token"
)

// limitLog records the limits a test sets, so that a grant can be checked
// against every limit that may have been in force since its Acquire began.
type limitLog struct {
	mu      sync.Mutex
	values  []int64 // every limit set, the first one first
	settled int     // the index of the last value whose SetLimit returned
}

func newLimitLog(initial int64) *limitLog { return &limitLog{values: []int64{initial}} }

// set moves the limit through s, logging the new value before the call,
// since it may be in force as soon as the call begins.
func (l *limitLog) set(ctx context.Context, s *etcdsem.Semaphore, limit int64) error {
	l.mu.Lock()
	l.values = append(l.values, limit)
	i := len(l.values) - 1
	l.mu.Unlock()
	err := s.SetLimit(ctx, limit)
	l.mu.Lock()
	l.settled = max(l.settled, i)
	l.mu.Unlock()
	return err
}

// inForce returns a mark for "now": the limits in force from now on are
// the last settled one and those set later.
func (l *limitLog) inForce() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.settled
}

// maxSince returns the largest limit that may have been in force since
// mark.
func (l *limitLog) maxSince(mark int) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Max(l.values[mark:])
}

// loadCycles returns the acquire-release cycles each client runs:
// ETCDSEM_CYCLES if set, otherwise def.
func loadCycles(t *testing.T, def int) int {
	if v := os.Getenv("ETCDSEM_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "ETCDSEM_CYCLES")
		return n
	}
	return def
}

// loadRun is a fleet of clients acquiring and releasing mixed weights on one
// semaphore while the limit moves, with what is held counted by the test.
type loadRun struct {
	t       *testing.T
	ctx     context.Context // ends with the test, or after ten minutes
	srv     *server
	prefix  string
	limits  *limitLog
	held    atomic.Int64 // permits held by tokens the test has not yet ended
	peak    atomic.Int64
	cycles  atomic.Int64 // cycles completed, over all clients
	resumed atomic.Int64 // handles made again after a session was lost
}

func newLoadRun(t *testing.T, srv *server, limit int64) *loadRun {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return &loadRun{t: t, ctx: ctx, srv: srv, prefix: prefixFor(t), limits: newLimitLog(limit)}
}

// weights are the requests the clients make: mostly small, some above the
// lowest limit the mover sets, so that waiters are passed over too.
var weights = []int64{1, 1, 1, 2, 2, 3}

// client runs cycles acquire-release cycles through handle h (a quarter of
// them try TryAcquire first), opening a new handle if h's session is lost
// (as a failed release does on a broken network), and retrying calls that
// fail with ErrUnavailable.
func (r *loadRun) client(id, cycles int, h *handle, ho handleOpts) {
	t := r.t
	rng := rand.New(rand.NewPCG(uint64(id), 7))
	ctx := r.ctx
	for range cycles {
		n := weights[rng.IntN(len(weights))]
		mark := r.limits.inForce()
		var tok token.Token
		for {
			var err error
			if rng.IntN(4) == 0 {
				// Sometimes try first, and wait only if refused: arrivals
				// that grant themselves race the waiters' grants.
				var ok bool
				if tok, ok, err = h.TryAcquire(ctx, n); ok {
					break
				}
			}
			if err == nil {
				tok, err = h.Acquire(ctx, n)
			}
			if err == nil {
				break
			}
			switch {
			case errors.Is(err, etcdsem.ErrUnavailable):
				continue
			case errors.Is(err, etcdsem.ErrSessionLost):
				if h, err = openHandle(t, r.srv, r.prefix, 0, 8, ho); err != nil {
					t.Errorf("client %d: opening a new handle: %v", id, err)
					return
				}
				r.resumed.Add(1)
				continue
			}
			t.Errorf("client %d: Acquire(%d): %v", id, n, err)
			return
		}
		cur := r.held.Add(n)
		if limit := r.limits.maxSince(mark); cur > limit {
			t.Errorf("client %d: %d permits held after a grant of %d, limit in force at most %d", id, cur, n, limit)
		}
		if p := r.peak.Load(); cur > p {
			r.peak.CompareAndSwap(p, cur)
		}
		r.held.Add(-n)
		if n > 1 && rng.IntN(4) == 0 {
			// Give part back first: the key's weight drops, then the
			// rest deletes it.
			part, _ := tok.Split(1)
			part.Release()
		}
		tok.Release()
		r.cycles.Add(1)
	}
}

// mover moves the limit among 2..6 until stop is closed, then sets it to 5.
func (r *loadRun) mover(h *handle, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(99, 7))
	ctx := r.ctx
	for {
		select {
		case <-stop:
			if err := r.limits.set(ctx, h.Semaphore, 5); err != nil {
				r.t.Errorf("SetLimit(5): %v", err)
			}
			return
		case <-time.After(time.Duration(5+rng.IntN(15)) * time.Millisecond):
		}
		if err := r.limits.set(ctx, h.Semaphore, 2+rng.Int64N(5)); err != nil && !errors.Is(err, etcdsem.ErrUnavailable) {
			r.t.Errorf("SetLimit: %v", err)
			return
		}
	}
}

// TestFleetLoadNeverExceedsTheLimitAndGrantsInOrder runs eight clients,
// each with its own etcd client and session, through acquire-release cycles
// with weights of 1 to 3 on a limit that a ninth moves among 2 and 6 every
// 5 to 20 ms. The test counts what is held: no grant may leave more held
// than the largest limit in force since its Acquire began. The recorded
// history is then replayed against the in-process rules: every grant
// admitted, in arrival order, by the state just before it.
//
// Each client runs 60 cycles by default (480 in all, about 3 s on two
// cores; ETCDSEM_CYCLES=1000 runs the 8 × 1000 in about a minute).
func TestFleetLoadNeverExceedsTheLimitAndGrantsInOrder(t *testing.T) {
	const clients = 8
	cycles := loadCycles(t, 60)
	srv := startServer(t)
	r := newLoadRun(t, srv, 5)
	rec := record(t, srv, r.prefix)
	ctl := newHandle(t, srv, r.prefix, 5, 8, handleOpts{})
	handles := make([]*handle, clients)
	for i := range handles {
		handles[i] = newHandle(t, srv, r.prefix, 0, 8, handleOpts{})
	}

	stop := make(chan struct{})
	var moverDone sync.WaitGroup
	moverDone.Add(1)
	go func() {
		defer moverDone.Done()
		r.mover(ctl, stop)
	}()
	start := time.Now()
	var wg sync.WaitGroup
	for i, h := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.client(i, cycles, h, handleOpts{})
		}()
	}
	wg.Wait()
	close(stop)
	moverDone.Wait()
	elapsed := time.Since(start)
	var rpcs int64
	for _, h := range handles {
		rpcs += h.rpcs.calls.Load()
	}
	t.Logf("%.1f round trips per cycle", float64(rpcs)/float64(r.cycles.Load()))

	require.Equal(t, etcdsem.Stats{Available: 5, Held: 0, Limit: 5, Max: 8}, mustStats(t, ctl.Semaphore))
	st, err := checkHistory(r.prefix, rec.stop(t))
	t.Logf("%d cycles in %v (%.0f/s), peak %d held, %d limit moves; %d grants in %d transactions (at most %d in one)",
		r.cycles.Load(), elapsed.Round(time.Millisecond), float64(r.cycles.Load())/elapsed.Seconds(),
		r.peak.Load(), st.limitMoves, st.grants, st.batches, st.maxBatch)
	require.NoError(t, err)
	require.Equal(t, int64(clients*cycles), r.cycles.Load())
	require.Equal(t, clients*cycles, st.grants, "every cycle's grant is in the history")
	require.Positive(t, st.limitMoves)
}
