package etcdsem_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/etcdsem"
	"github.com/atomicsem/atomicsem/semtest"
)

// Both assertions hold at compile time: etcdsem's handle adapts to the
// suite's Semaphore through semtest.Remote, with TryForget and Parked.
var (
	_ semtest.RemoteSemaphore[etcdsem.Stats] = (*etcdsem.Semaphore)(nil)
	_ interface {
		TryForget(context.Context, int64) (int64, bool, error)
		Parked(context.Context) (int, error)
	} = (*etcdsem.Semaphore)(nil)
)

// fleet hands out the handles of one test: every semaphore a check makes
// gets a fresh prefix on one server, and its handles use up to three
// clients, each with its own session, made once per check.
type fleet struct {
	srv    *server
	serial atomic.Int64

	mu      sync.Mutex
	clients map[*testing.T][]*handle                 // per check: the clients and sessions its handles use
	joined  map[*etcdsem.Semaphore]int               // handles joined to each semaphore
	handles map[semtest.Semaphore]*etcdsem.Semaphore // the handle behind each adapter
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
	return f.open(t, 0, prefix, initial, max)
}

// open makes a handle on prefix through the check's client-th client, and
// adapts it to the suite with semtest.Remote.
func (f *fleet) open(t *testing.T, client int, prefix string, initial, max int64) (semtest.Semaphore, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := etcdsem.New(ctx, f.session(t, client).session, prefix, initial, max)
	if err != nil {
		return nil, err
	}
	adapted := semtest.Remote(t, s)
	f.mu.Lock()
	f.handles[adapted] = s
	f.mu.Unlock()
	return adapted, nil
}

// join opens s's semaphore through the check's next client: s's handles
// use clients 0, 1 and 2.
func (f *fleet) join(t *testing.T, s semtest.Semaphore) semtest.Semaphore {
	f.mu.Lock()
	h := f.handles[s]
	f.joined[h]++
	client := f.joined[h]
	f.mu.Unlock()
	joined, err := f.open(t, client, h.Prefix(), 0, h.Max())
	require.NoError(t, err)
	return joined
}

// TestConformance runs the conformance suite against etcdsem on one
// server, each handle of a semaphore through a client of its own. The
// suite quiesces it by polling Parked, and skips what etcd cannot promise: the
// Go memory model's ordering between a Release and the Acquire it admits
// (it runs through the network), and the checks of exact fake time.
func TestConformance(t *testing.T) {
	f := &fleet{
		srv:     startServer(t),
		clients: make(map[*testing.T][]*handle),
		joined:  make(map[*etcdsem.Semaphore]int),
		handles: make(map[semtest.Semaphore]*etcdsem.Semaphore),
	}
	semtest.Run(t, f.new,
		semtest.Join(f.join),
		semtest.Load(8, 25),
		semtest.Rounds(20),
	)
}
