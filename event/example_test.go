package event_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/atomicsem/atomicsem/event"
)

// A worker sleeps on an AutoReset event and drains a queue each time it is
// woken. Sets saturate, so the worker must take everything queued per
// wake-up rather than one item per Set.
func ExampleAutoReset() {
	var wake event.AutoReset
	var mu sync.Mutex
	var queue []string
	done := make(chan struct{})

	go func() {
		defer close(done)
		for {
			if err := wake.Wait(context.Background()); err != nil {
				return
			}
			mu.Lock()
			batch := queue
			queue = nil
			mu.Unlock()
			for _, job := range batch {
				if job == "stop" {
					return
				}
				fmt.Println("handled", job)
			}
		}
	}()

	for _, job := range []string{"resize", "upload", "stop"} {
		mu.Lock()
		queue = append(queue, job)
		mu.Unlock()
		wake.Set()
	}
	<-done
	// Output:
	// handled resize
	// handled upload
}

// A ManualReset event is a gate: every goroutine waiting on it goes through
// once it is set, and so does every later one, until Reset closes it again.
func ExampleManualReset() {
	var open event.ManualReset
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if open.Wait(context.Background()) == nil {
				mu.Lock()
				passed++
				mu.Unlock()
			}
		}()
	}

	open.Set()
	wg.Wait()
	fmt.Println("passed:", passed, "set:", open.IsSet())

	open.Reset()
	select {
	case <-open.Done():
		fmt.Println("gate open")
	default:
		fmt.Println("gate closed")
	}
	// Output:
	// passed: 3 set: true
	// gate closed
}
