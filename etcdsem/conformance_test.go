package etcdsem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/etcdsem"
	"github.com/atomicsem/atomicsem/semtest"
	"github.com/atomicsem/atomicsem/token"
)

// conformant is an etcdsem.Semaphore as semtest sees it. Calls without a
// context get one bounded by the test's patience; an error that the
// in-process semaphore answers with false (closed, bad input) becomes
// false, and any other error fails the test.
type conformant struct {
	t *testing.T
	*etcdsem.Semaphore
}

// refusal reports whether err is one that the in-process semaphore
// answers with false or zero rather than an error.
func refusal(err error) bool {
	return errors.Is(err, atomicsem.ErrClosed) || errors.Is(err, atomicsem.ErrInvalidPermits) ||
		errors.Is(err, atomicsem.ErrExceedsMax)
}

func (c conformant) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 20*time.Second)
}

func (c conformant) check(op string, err error) {
	if err != nil && !refusal(err) {
		c.t.Errorf("%s: %v", op, err)
	}
}

func (c conformant) TryAcquire(n int64) (tok token.Token, ok bool) {
	ctx, cancel := c.ctx()
	defer cancel()
	var err error
	tok, ok, err = c.Semaphore.TryAcquire(ctx, n)
	c.check(fmt.Sprintf("TryAcquire(%d)", n), err)
	return
}

// TryForget implements semtest.Forgetter.
func (c conformant) TryForget(n int64) (int64, bool) {
	ctx, cancel := c.ctx()
	defer cancel()
	limit, ok, err := c.Semaphore.TryForget(ctx, n)
	c.check(fmt.Sprintf("TryForget(%d)", n), err)
	return limit, ok
}

func (c conformant) TryRelease(n int64) bool {
	ctx, cancel := c.ctx()
	defer cancel()
	ok, err := c.Semaphore.TryRelease(ctx, n)
	c.check(fmt.Sprintf("TryRelease(%d)", n), err)
	return ok
}

func (c conformant) Refill(n int64) int64 {
	ctx, cancel := c.ctx()
	defer cancel()
	added, err := c.Semaphore.Refill(ctx, n)
	c.check(fmt.Sprintf("Refill(%d)", n), err)
	return added
}

func (c conformant) SetLimit(limit int64) error {
	ctx, cancel := c.ctx()
	defer cancel()
	err := c.Semaphore.SetLimit(ctx, limit)
	c.check(fmt.Sprintf("SetLimit(%d)", limit), err)
	return err
}

func (c conformant) Close() {
	ctx, cancel := c.ctx()
	defer cancel()
	c.check("Close", c.Semaphore.Close(ctx))
}

func (c conformant) Stats() semtest.Stats {
	ctx, cancel := c.ctx()
	defer cancel()
	st, err := c.Semaphore.Stats(ctx)
	c.check("Stats", err)
	return semtest.Stats{
		Available: st.Available, Held: st.Held, Limit: st.Limit, Max: st.Max,
		Waiters: st.Waiters, Closed: st.Closed,
	}
}

// Parked implements semtest.Settler.
func (c conformant) Parked() int {
	ctx, cancel := c.ctx()
	defer cancel()
	n, err := etcdsem.Parked(ctx, c.Semaphore)
	c.check("Parked", err)
	return n
}

// fleet hands out the handles of one test: every semaphore a check makes
// gets a fresh prefix on one server, and its handles use up to three
// clients, each with its own session, made once per check.
type fleet struct {
	srv    *server
	serial atomic.Int64

	mu      sync.Mutex
	clients map[*testing.T][]*handle   // per check: the clients and sessions its handles use
	joined  map[*etcdsem.Semaphore]int // handles joined to each semaphore
}

// session returns the i-th client's handle for check t, made on first use.
func (f *fleet) session(t *testing.T, i int) *handle {
	f.mu.Lock()
	defer f.mu.Unlock()
	hs := f.clients[t]
	for len(hs) <= i {
		h := &handle{rpcs: &rpcCounter{}}
		h.cli = newClient(t, f.srv, nil)
		h.session = newSession(t, h.cli, 10)
		hs = append(hs, h)
	}
	f.clients[t] = hs
	return hs[i]
}

func (f *fleet) new(t *testing.T, initial, max int64) (semtest.Semaphore, error) {
	prefix := fmt.Sprintf("/conformance/%d/", f.serial.Add(1))
	s, err := f.open(t, 0, prefix, initial, max)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (f *fleet) open(t *testing.T, client int, prefix string, initial, max int64) (conformant, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := etcdsem.New(ctx, f.session(t, client).session, prefix, initial, max)
	return conformant{t, s}, err
}

// join opens s's semaphore through the check's next client: s's handles
// use clients 0, 1 and 2.
func (f *fleet) join(t *testing.T, s semtest.Semaphore) semtest.Semaphore {
	c := s.(conformant)
	f.mu.Lock()
	f.joined[c.Semaphore]++
	client := f.joined[c.Semaphore]
	f.mu.Unlock()
	h, err := f.open(t, client, c.Prefix(), 0, c.Max())
	require.NoError(t, err)
	return h
}

// TestConformance runs the conformance suite against etcdsem on one
// server, each handle of a semaphore through a client of its own. The
// suite settles by polling Parked, and skips what etcd cannot promise: the
// Go memory model's ordering between a Release and the Acquire it admits
// (it runs through the network), and the checks of exact fake time.
func TestConformance(t *testing.T) {
	f := &fleet{
		srv:     startServer(t),
		clients: make(map[*testing.T][]*handle),
		joined:  make(map[*etcdsem.Semaphore]int),
	}
	semtest.Run(t, f.new,
		semtest.Join(f.join),
		semtest.Load(8, 25),
		semtest.Rounds(20),
	)
}
