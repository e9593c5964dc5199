package etcdsem_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/atomicsem/atomicsem/token"
)

// locker is what the benchmark drives: one client's way to take and give
// back one permit.
type locker interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

// semLocker is an etcdsem handle.
type semLocker struct {
	h   *handle
	tok token.Token
}

func (l *semLocker) lock(ctx context.Context) error {
	var err error
	l.tok, err = l.h.Acquire(ctx, 1)
	return err
}

func (l *semLocker) unlock(context.Context) error {
	l.tok.Release()
	return nil
}

// mutexLocker is etcd's own concurrency.Mutex.
type mutexLocker struct{ m *concurrency.Mutex }

func (l mutexLocker) lock(ctx context.Context) error   { return l.m.Lock(ctx) }
func (l mutexLocker) unlock(ctx context.Context) error { return l.m.Unlock(ctx) }

// nextRevMutex is concurrency.Mutex's algorithm with one change: a waiter
// watches the key ahead of it from the revision after the read that found
// that key, instead of from the read's revision. etcd serves a watch that
// starts at or before its current revision from a catch-up loop that runs
// every 100 ms, and one that starts after it as each change is made.
type nextRevMutex struct {
	s     *concurrency.Session
	pfx   string
	myKey string
	myRev int64
}

func (m *nextRevMutex) lock(ctx context.Context) error {
	cli := m.s.Client()
	m.myKey = fmt.Sprintf("%s%x", m.pfx, m.s.Lease())
	owner := clientv3.OpGet(m.pfx, clientv3.WithFirstCreate()...)
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(m.myKey), "=", 0)).
		Then(clientv3.OpPut(m.myKey, "", clientv3.WithLease(m.s.Lease())), owner).
		Else(clientv3.OpGet(m.myKey), owner).
		Commit()
	if err != nil {
		return err
	}
	m.myRev = resp.Header.Revision
	if !resp.Succeeded {
		m.myRev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 0 || kvs[0].CreateRevision == m.myRev {
		return nil
	}
	for {
		g, err := cli.Get(ctx, m.pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(m.myRev-1))...)
		if err != nil {
			return err
		}
		if len(g.Kvs) == 0 {
			return nil
		}
		if err := waitDelete(ctx, cli, string(g.Kvs[0].Key), g.Header.Revision+1); err != nil {
			return err
		}
	}
}

// waitDelete waits until key is deleted at revision from or later.
func waitDelete(ctx context.Context, cli *clientv3.Client, key string, from int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for resp := range cli.Watch(wctx, key, clientv3.WithRev(from)) {
		if err := resp.Err(); err != nil {
			return err
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return nil
			}
		}
	}
	return ctx.Err()
}

func (m *nextRevMutex) unlock(ctx context.Context) error {
	_, err := m.s.Client().Delete(ctx, m.myKey)
	return err
}

// fleetImpl is one way to share a limit among clients.
type fleetImpl struct {
	name string
	// open returns client i's locker for a limit of limit under prefix,
	// counting its calls with rpcs.
	open func(b *testing.B, srv *server, prefix string, limit, i int, rpcs *rpcCounter) locker
}

// mutexSlot is the prefix of the mutex that client i uses at limit limit:
// a Mutex has one permit, so limit L is L mutexes, the clients spread
// over them in turn.
func mutexSlot(prefix string, limit, i int) string { return fmt.Sprintf("%s%d/", prefix, i%limit) }

var fleetImpls = []fleetImpl{
	{"etcdsem", func(b *testing.B, srv *server, prefix string, limit, i int, rpcs *rpcCounter) locker {
		return &semLocker{h: newHandle(b, srv, prefix, int64(limit), int64(limit), handleOpts{rpcs: rpcs})}
	}},
	{"mutex", func(b *testing.B, srv *server, prefix string, limit, i int, rpcs *rpcCounter) locker {
		cli := newClient(b, srv, rpcs)
		return mutexLocker{concurrency.NewMutex(newSession(b, cli, 10), mutexSlot(prefix, limit, i))}
	}},
	{"mutex-nextrev", func(b *testing.B, srv *server, prefix string, limit, i int, rpcs *rpcCounter) locker {
		cli := newClient(b, srv, rpcs)
		return &nextRevMutex{s: newSession(b, cli, 10), pfx: mutexSlot(prefix, limit, i)}
	}},
}

// BenchmarkFleet measures a limit of 1 or 4 shared by 1 to 64 clients,
// each with its own etcd client, session and goroutine, on one etcd server:
// etcdsem against etcd's concurrency.Mutex and a Mutex that watches from
// the revision after its read (nextRevMutex). At limit 4 the mutexes are
// four, the clients spread over them. One op is one acquire and release
// (lock and unlock), by any client. Beside ns/op it reports the clients'
// cycle latency (p50-ns, p99-ns), the unary calls (rpcs/op) and the watch
// events received (events/op) per op, over all clients.
func BenchmarkFleet(b *testing.B) {
	srv := startServer(b)
	var serial atomic.Int64
	for _, limit := range []int{1, 4} {
		for _, clients := range []int{1, 4, 16, 32, 64} {
			for _, impl := range fleetImpls {
				name := fmt.Sprintf("impl=%s/limit=%d/clients=%d", impl.name, limit, clients)
				var lockers []locker // opened once, reused by every run of the sub-benchmark
				rpcs := &rpcCounter{}
				parent := b // the clients live until the whole benchmark ends
				b.Run(name, func(b *testing.B) {
					if lockers == nil {
						prefix := fmt.Sprintf("/bench/%d/", serial.Add(1))
						for i := range clients {
							lockers = append(lockers, impl.open(parent, srv, prefix, limit, i, rpcs))
						}
					}
					cycle(b, lockers, rpcs)
				})
			}
		}
	}
}

// cycle runs b.N lock-unlock cycles in all, one goroutine per locker, and
// reports the latencies and counts BenchmarkFleet describes.
func cycle(b *testing.B, lockers []locker, rpcs *rpcCounter) {
	ctx := context.Background()
	var remaining atomic.Int64
	remaining.Store(int64(b.N))
	lat := make([][]time.Duration, len(lockers))
	calls, events := rpcs.calls.Load(), rpcs.events.Load()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for remaining.Add(-1) >= 0 {
				start := time.Now()
				if err := l.lock(ctx); err != nil {
					b.Error(err)
					return
				}
				if err := l.unlock(ctx); err != nil {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(start))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2]), "p50-ns")
		b.ReportMetric(float64(all[len(all)*99/100]), "p99-ns")
	}
	b.ReportMetric(float64(rpcs.calls.Load()-calls)/float64(b.N), "rpcs/op")
	b.ReportMetric(float64(rpcs.events.Load()-events)/float64(b.N), "events/op")
}
