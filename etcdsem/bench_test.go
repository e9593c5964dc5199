package etcdsem_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"go.etcd.io/etcd/client/v3/concurrency"
)

// locker is what the benchmark drives: one client's way to take and give
// back the single permit.
type locker interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

// semLocker is an etcdsem handle at limit 1.
type semLocker struct {
	h       *handle
	release func()
}

func (l *semLocker) lock(ctx context.Context) error {
	tok, err := l.h.Acquire(ctx, 1)
	if err != nil {
		return err
	}
	l.release = tok.Release
	return nil
}

func (l *semLocker) unlock(context.Context) error {
	l.release()
	return nil
}

// mutexLocker is etcd's own concurrency.Mutex.
type mutexLocker struct{ m *concurrency.Mutex }

func (l mutexLocker) lock(ctx context.Context) error   { return l.m.Lock(ctx) }
func (l mutexLocker) unlock(ctx context.Context) error { return l.m.Unlock(ctx) }

// BenchmarkLimitOne measures throughput at a limit of 1 shared by one or
// four clients, each with its own etcd client, session and goroutine,
// against etcd's concurrency.Mutex on the same server in the same run. One
// op is one acquire and release (lock and unlock), by any client.
func BenchmarkLimitOne(b *testing.B) {
	srv := startServer(b)
	impls := []struct {
		name string
		make func(b *testing.B, prefix string) locker
	}{
		{"etcdsem", func(b *testing.B, prefix string) locker {
			return &semLocker{h: newHandle(b, srv, prefix, 1, 1, handleOpts{})}
		}},
		{"mutex", func(b *testing.B, prefix string) locker {
			cli := newClient(b, srv, nil)
			return mutexLocker{concurrency.NewMutex(newSession(b, cli, 10), prefix)}
		}},
	}
	var serial atomic.Int64
	for _, clients := range []int{1, 4} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("impl=%s/clients=%d", impl.name, clients), func(b *testing.B) {
				prefix := fmt.Sprintf("/bench/%s/%d", impl.name, serial.Add(1))
				lockers := make([]locker, clients)
				for i := range lockers {
					lockers[i] = impl.make(b, prefix)
				}
				cycle(b, lockers)
			})
		}
	}
}

// cycle runs b.N lock-unlock cycles in all, one goroutine per locker.
func cycle(b *testing.B, lockers []locker) {
	ctx := context.Background()
	var remaining atomic.Int64
	remaining.Store(int64(b.N))
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for remaining.Add(-1) >= 0 {
				if err := l.lock(ctx); err != nil {
					b.Error(err)
					return
				}
				if err := l.unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
