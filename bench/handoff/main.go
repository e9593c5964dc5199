// Command handoff runs the contended hand-off of bench's BenchmarkContended
// (limit 1, 64 goroutines per P that start parked, each taking and returning
// one permit) for atomicsem, x/sync's semaphore and a buffered channel, in a
// program that is not a test binary, and prints the results in the
// benchmark format, under the same names as the test binary's rows:
//
//	BenchmarkContended/impl=atomicsem/limit=1-2  ...  ns/op
//
// So benchstat compares what a production binary pays for a hand-off with
// what a test binary pays (see handoff.sh). The harness is a copy of
// runQueued's shape, kept apart because a test file cannot be imported.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sync/semaphore"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// sem is the benchmark's view of a semaphore of one permit, called through
// an interface for every implementation alike.
type sem interface {
	acquire(ctx context.Context, h *held) error
	release(h *held)
}

// held is one goroutine's record of what it holds, padded so that no two
// goroutines' records share a cache line.
type held struct {
	tok token.Token
	_   [128 - unsafe.Sizeof(token.Token{})]byte
}

type atomicsemSem struct{ s *atomicsem.Semaphore }

func (a atomicsemSem) acquire(ctx context.Context, h *held) (err error) {
	h.tok, err = a.s.Acquire(ctx, 1)
	return err
}
func (a atomicsemSem) release(h *held) { h.tok.Release() }

type xsyncSem struct{ w *semaphore.Weighted }

func (x xsyncSem) acquire(ctx context.Context, _ *held) error { return x.w.Acquire(ctx, 1) }
func (x xsyncSem) release(*held)                              { x.w.Release(1) }

type chanSem chan struct{}

func (c chanSem) acquire(ctx context.Context, _ *held) error {
	select {
	case c <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (c chanSem) release(*held) { <-c }

var impls = []struct {
	name string
	new  func() sem
}{
	{"atomicsem", func() sem { return atomicsemSem{atomicsem.MustNew(1, 1)} }},
	{"xsyncsem", func() sem { return xsyncSem{semaphore.NewWeighted(1)} }},
	{"chan", func() sem { return make(chanSem, 1) }},
}

// contended runs b.N acquire-release pairs on s from 64 goroutines per P
// that start parked behind the one permit, held until the timer runs.
func contended(b *testing.B, s sem) {
	first := new(held)
	if err := s.acquire(context.Background(), first); err != nil {
		b.Fatal(err)
	}
	workers := 64 * runtime.GOMAXPROCS(0)
	chunk := min(max(int64(b.N/(workers*100)), 1), 1000)
	var next atomic.Int64
	var arrived, done sync.WaitGroup
	arrived.Add(workers)
	done.Add(workers)
	for range workers {
		go func() {
			defer done.Done()
			ctx, h := context.Background(), new(held)
			arrived.Done()
			for {
				end := next.Add(chunk)
				if end-chunk >= int64(b.N) {
					return
				}
				for range min(end, int64(b.N)) - (end - chunk) {
					if err := s.acquire(ctx, h); err != nil {
						panic(err)
					}
					s.release(h)
				}
			}
		}()
	}
	arrived.Wait()
	time.Sleep(time.Millisecond)
	b.ResetTimer()
	start := processCPU()
	s.release(first)
	done.Wait()
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
}

// processCPU returns the user and system CPU time the process has used so
// far, as bench's measureCPU reads it: on a shared machine other work
// inflates ns/op but not what this process ran.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	testing.Init()
	count := flag.Int("count", 1, "samples of each implementation")
	benchtime := flag.String("benchtime", "500ms", "-test.benchtime of each sample")
	flag.Parse()
	if err := flag.Set("test.benchtime", *benchtime); err != nil {
		fmt.Fprintln(os.Stderr, "handoff:", err)
		os.Exit(2)
	}
	fmt.Printf("goos: %s\ngoarch: %s\npkg: github.com/atomicsem/atomicsem/bench\n", runtime.GOOS, runtime.GOARCH)
	for range *count {
		for _, im := range impls {
			r := testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				contended(b, im.new())
			})
			fmt.Printf("BenchmarkContended/impl=%s/limit=1-%d\t%s\t%s\n",
				im.name, runtime.GOMAXPROCS(0), r.String(), r.MemString())
		}
	}
}
