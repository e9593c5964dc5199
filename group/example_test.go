package group_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	pathpkg "path"
	"slices"
	"sync"
	"sync/atomic"
	"testing/fstest"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/group"
)

// Search several back ends at once and give up on all of them at the first
// failure: errgroup's "Google Search 2.0" example, on a semaphore that bounds
// the searches of every request together.
func ExampleWithContext() {
	searches := atomicsem.MustNew(16, 64) // searches in flight, for all requests

	search := func(ctx context.Context, query string) ([]string, error) {
		g, ctx := group.WithContext(ctx, searches)
		kinds := []string{"web", "image", "video"}
		results := make([]string, len(kinds))
		for i, kind := range kinds {
			err := g.Go(ctx, 1, func() error {
				results[i] = fmt.Sprintf("%s result for %q", kind, query)
				return nil
			})
			if err != nil {
				break // the group has failed or ctx is done; Wait says why
			}
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		return results, nil
	}

	results, err := search(context.Background(), "golang")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range results {
		fmt.Println(r)
	}
	// Output:
	// web result for "golang"
	// image result for "golang"
	// video result for "golang"
}

// site stands in for a web site that answers 429 Too Many Requests the first
// time some pages are asked for.
type site struct {
	mu   sync.Mutex
	busy map[string]bool // pages whose next request gets 429
}

func (s *site) get(_ context.Context, page string) (status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy[page] {
		s.busy[page] = false
		return 429, ""
	}
	return 200, "<html>" + page + "</html>"
}

// Crawl a site with up to four requests at a time, drop to one at a time
// when it answers 429 Too Many Requests, and go back up once it has
// recovered. The limit lives in the semaphore, so changing it takes effect
// for the requests of the round in progress: those in flight finish, and
// the next ones wait for the new limit.
func Example_crawler() {
	requests := atomicsem.MustNew(4, 4)
	web := &site{busy: map[string]bool{"/c": true, "/f": true}}

	var (
		mu      sync.Mutex
		fetched []string
	)
	todo := []string{"/a", "/b", "/c", "/d", "/e", "/f", "/g", "/h"}
	for round := 1; len(todo) > 0; round++ {
		var retry []string
		g, ctx := group.WithContext(context.Background(), requests)
		for _, page := range todo {
			_ = g.Go(ctx, 1, func() error {
				status, _ := web.get(ctx, page)
				mu.Lock()
				defer mu.Unlock()
				if status == 429 {
					_ = requests.SetLimit(1) // back off: one request at a time
					retry = append(retry, page)
					return nil
				}
				fetched = append(fetched, page)
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("round %d: %d to retry, limit %d\n", round, len(retry), requests.Stats().Limit)
		todo = retry
	}
	_ = requests.SetLimit(4) // the site has recovered
	slices.Sort(fetched)
	fmt.Println("fetched", fetched, "limit", requests.Stats().Limit)
	// Output:
	// round 1: 2 to retry, limit 1
	// round 2: 0 to retry, limit 1
	// fetched [/a /b /c /d /e /f /g /h] limit 4
}

// Process inputs of very different sizes with at most 64 KiB of them in
// memory at once: each task's weight is its input's size in bytes, so a few
// large inputs or many small ones run together, never more than the budget.
// An input larger than the whole budget is refused at once.
func Example_pipeline() {
	const budget = 64 << 10
	memory := atomicsem.MustNew(budget, budget)
	sizes := []int{40 << 10, 30 << 10, 1 << 10, 2 << 10, 60 << 10, 100 << 10, 8 << 10}

	var inUse, peak atomic.Int64
	sums := make([]int, len(sizes))
	g, ctx := group.WithContext(context.Background(), memory)
	for i, size := range sizes {
		err := g.Go(ctx, int64(size), func() error {
			now := inUse.Add(int64(size))
			for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
			}
			data := make([]byte, size) // the input, read into memory
			for j := range data {
				data[j] = 1
			}
			for _, b := range data {
				sums[i] += int(b)
			}
			inUse.Add(-int64(size))
			return nil
		})
		if errors.Is(err, atomicsem.ErrExceedsMax) {
			fmt.Printf("input %d (%d KiB) does not fit the budget\n", i, size>>10)
			break
		}
	}
	err := g.Wait()
	fmt.Println("error:", errors.Is(err, atomicsem.ErrExceedsMax))
	fmt.Println("KiB processed:", sums[0]>>10, sums[1]>>10, sums[4]>>10)
	fmt.Println("peak within budget:", peak.Load() <= budget)
	// Output:
	// input 5 (100 KiB) does not fit the budget
	// error: true
	// KiB processed: 40 30 60
	// peak within budget: true
}

// Count the lines of every Go file in a tree, two files at a time, and list
// the counts in the order of the names. (An in-memory tree stands in for
// os.DirFS.)
func ExampleMap() {
	fsys := fstest.MapFS{
		"cmd/main.go":     {Data: []byte("package main\n\nfunc main() {}\n")},
		"go.mod":          {Data: []byte("module example.com/m\n")},
		"lib/lib.go":      {Data: []byte("package lib\n")},
		"lib/lib_test.go": {Data: []byte("package lib\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) {}\n")},
	}
	var names []string
	_ = fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && pathpkg.Ext(path) == ".go" {
			names = append(names, path)
		}
		return err
	})

	files := atomicsem.MustNew(2, 2) // open files at once
	lines, err := group.Map(context.Background(), files, names, func(_ context.Context, name string) (int, error) {
		f, err := fsys.Open(name)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		n := 0
		for s := bufio.NewScanner(f); s.Scan(); {
			n++
		}
		return n, nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, name := range names {
		fmt.Println(name, lines[i])
	}
	// Output:
	// cmd/main.go 3
	// lib/lib.go 1
	// lib/lib_test.go 5
}
