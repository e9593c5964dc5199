package overloadbench_test

import (
	"math"
	"sync"
)

// netflixPartitions is a model of the admission rule of Netflix's
// concurrency-limits AbstractPartitionedLimiter (the library is Java; this
// is its semantics, not its code): each partition has a share of the
// limit, ⌈share × limit⌉ at least 1; a request is refused only when the
// requests in flight have reached the limit and its partition has reached
// its own share. So a partition below its share is admitted even when the
// limit is full, which is how it gets its guarantee back, and a partition
// may borrow the whole limit while the others are idle. There is no queue:
// a refused request is refused at once.
//
// The model takes its decision under a mutex, so it shows the rule itself,
// not the check-then-act race of an open pull request against the library:
// even so, the requests in flight exceed the limit whenever a partition
// claims its share back from a borrower, by up to the sum of the shares of
// the partitions below theirs.
type netflixPartitions struct {
	mu       sync.Mutex
	limit    int
	inFlight int
	busy     []int
	share    []int
}

func newNetflixPartitions(limit int, shares ...float64) *netflixPartitions {
	p := &netflixPartitions{limit: limit, busy: make([]int, len(shares))}
	for _, s := range shares {
		p.share = append(p.share, max(1, int(math.Ceil(s*float64(limit)))))
	}
	return p
}

// acquire reports whether a request of partition i is admitted, and counts
// it in flight if it is.
func (p *netflixPartitions) acquire(i int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inFlight >= p.limit && p.busy[i] >= p.share[i] {
		return false
	}
	p.inFlight++
	p.busy[i]++
	return true
}

func (p *netflixPartitions) release(i int) {
	p.mu.Lock()
	p.inFlight--
	p.busy[i]--
	p.mu.Unlock()
}
