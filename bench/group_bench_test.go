package bench_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/sourcegraph/conc/pool"
	"golang.org/x/sync/errgroup"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/group"
)

// A spawner is what BenchmarkGroupGo drives: a way to run functions with at
// most limit of them at once, and to wait for them and their first error.
// Every implementation, the subject included, is called through it, so the
// cost of the dynamic call is the same in every column.
//
// The implementations: group (package group on an atomicsem semaphore),
// errgroup (golang.org/x/sync/errgroup with SetLimit), conc (the error pool
// of github.com/sourcegraph/conc, which reuses its goroutines), and chanwg
// (a buffered channel as the semaphore and a sync.WaitGroup, by hand).
type spawner interface {
	spawn(f func() error)
	wait() error
}

// spawners builds each implementation with a limit of limit functions at
// once.
var spawners = []struct {
	name string
	new  func(limit int) spawner
}{
	{"group", func(limit int) spawner {
		sem, err := atomicsem.New(int64(limit), int64(limit))
		if err != nil {
			panic(err)
		}
		return groupSpawner{group.New(sem)}
	}},
	{"errgroup", func(limit int) spawner {
		g := new(errgroup.Group)
		g.SetLimit(limit)
		return g2spawner{g}
	}},
	{"conc", func(limit int) spawner {
		return concSpawner{pool.New().WithErrors().WithFirstError().WithMaxGoroutines(limit)}
	}},
	{"chanwg", func(limit int) spawner {
		return &chanSpawner{sem: make(chan struct{}, limit)}
	}},
}

type groupSpawner struct{ g *group.Group }

func (s groupSpawner) spawn(f func() error) {
	if err := s.g.Go(context.Background(), 1, f); err != nil {
		panic(err)
	}
}
func (s groupSpawner) wait() error { return s.g.Wait() }

type g2spawner struct{ g *errgroup.Group }

func (s g2spawner) spawn(f func() error) { s.g.Go(f) }
func (s g2spawner) wait() error          { return s.g.Wait() }

type concSpawner struct{ p *pool.ErrorPool }

func (s concSpawner) spawn(f func() error) { s.p.Go(f) }
func (s concSpawner) wait() error          { return s.p.Wait() }

// chanSpawner is the hand-written baseline: a buffered channel as the
// semaphore, a WaitGroup, and the first error under a sync.Once.
type chanSpawner struct {
	sem  chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	err  error
}

func (s *chanSpawner) spawn(f func() error) {
	s.sem <- struct{}{}
	s.wg.Add(1)
	go func() {
		defer func() {
			<-s.sem
			s.wg.Done()
		}()
		if err := f(); err != nil {
			s.once.Do(func() { s.err = err })
		}
	}()
}
func (s *chanSpawner) wait() error { s.wg.Wait(); return s.err }

// BenchmarkGroupGo measures starting a trivial function under a limit and
// waiting for it: one operation is one spawn, and the wait for all of them
// is spread over the operations. With a limit of 1 every spawn waits for the
// previous function to end; with a limit above the number of CPUs the
// spawner rarely waits.
func BenchmarkGroupGo(b *testing.B) {
	nop := func() error { return nil }
	for _, limit := range []int{1, 4, 64} {
		for _, im := range spawners {
			b.Run("impl="+im.name+"/limit="+strconv.Itoa(limit), func(b *testing.B) {
				s := im.new(limit)
				b.ReportAllocs()
				defer measureCPU(b)()
				for range b.N {
					s.spawn(nop)
				}
				if err := s.wait(); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// A mapFunc maps in to its doubles with at most limit calls at once.
type mapFunc func(ctx context.Context, limit int, in []int) ([]int, error)

func double(_ context.Context, x int) (int, error) { return 2 * x, nil }

// mappers are the ways to map a slice under a limit: group (group.Map),
// group-go (a loop of Group.Go, what Map saves its callers writing), and
// the errgroup, conc and chanwg equivalents of the loop, each writing its
// result at the element's index and cancelling the rest at the first error.
var mappers = []struct {
	name string
	run  mapFunc
}{
	{"group", func(ctx context.Context, limit int, in []int) ([]int, error) {
		sem, err := atomicsem.New(int64(limit), int64(limit))
		if err != nil {
			return nil, err
		}
		return group.Map(ctx, sem, in, double)
	}},
	{"group-go", func(ctx context.Context, limit int, in []int) ([]int, error) {
		sem, err := atomicsem.New(int64(limit), int64(limit))
		if err != nil {
			return nil, err
		}
		out := make([]int, len(in))
		g, gctx := group.WithContext(ctx, sem)
		for i, x := range in {
			if g.Go(gctx, 1, func() (err error) {
				out[i], err = double(gctx, x)
				return err
			}) != nil {
				break
			}
		}
		return out, g.Wait()
	}},
	{"errgroup", func(ctx context.Context, limit int, in []int) ([]int, error) {
		out := make([]int, len(in))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(limit)
		for i, x := range in {
			g.Go(func() (err error) {
				out[i], err = double(gctx, x)
				return err
			})
		}
		return out, g.Wait()
	}},
	{"conc", func(ctx context.Context, limit int, in []int) ([]int, error) {
		out := make([]int, len(in))
		p := pool.New().WithContext(ctx).WithCancelOnError().WithFirstError().WithMaxGoroutines(limit)
		for i, x := range in {
			p.Go(func(ctx context.Context) (err error) {
				out[i], err = double(ctx, x)
				return err
			})
		}
		return out, p.Wait()
	}},
	{"chanwg", func(ctx context.Context, limit int, in []int) ([]int, error) {
		out := make([]int, len(in))
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		s := &chanSpawner{sem: make(chan struct{}, limit)}
		for i, x := range in {
			s.spawn(func() (err error) {
				if out[i], err = double(ctx, x); err != nil {
					cancel(err)
				}
				return err
			})
		}
		return out, s.wait()
	}},
}

// BenchmarkGroupMap measures mapping 10 000 integers to their doubles with
// a limit on the calls at once: one operation is one whole map.
func BenchmarkGroupMap(b *testing.B) {
	in := make([]int, 10_000)
	for i := range in {
		in[i] = i
	}
	for _, limit := range []int{1, 4, 64} {
		for _, im := range mappers {
			b.Run("impl="+im.name+"/items=10000/limit="+strconv.Itoa(limit), func(b *testing.B) {
				b.ReportAllocs()
				defer measureCPU(b)()
				for range b.N {
					out, err := im.run(context.Background(), limit, in)
					if err != nil || out[len(out)-1] != 2*in[len(in)-1] {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
