// Command concurrentends ends one token from two goroutines at once, the
// misuse that token.Token documents as a data race. Built with -race, it
// must be reported; TestConcurrentEndsAreReportedByTheRaceDetector checks
// that it is.
package main

import (
	"sync"

	"github.com/atomicsem/atomicsem/token"
)

type owner struct{}

func (owner) ReturnPermits(int64, uint32) {}
func (owner) ForgetPermits(int64, uint32) {}
func (o owner) SplitPermits(_, _ int64, tag uint32) (token.Owner, uint32) {
	return o, tag
}

func main() {
	tok := token.New(owner{}, 1, 0)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { _ = recover() }() // the loser may see the token spent
			tok.Release()
		}()
	}
	wg.Wait()
}
