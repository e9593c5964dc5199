package atomicsem_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// The semaphore in one page: bound how much runs at once, change the bound
// while it runs, and wait for what is out to come back.
func Example() {
	sem := atomicsem.MustNew(2, 8) // 2 at once now, never more than 8

	tok, err := sem.Acquire(context.Background(), 1)
	if err != nil {
		fmt.Println(err) // ctx.Err(), or atomicsem.ErrClosed
		return
	}
	fmt.Printf("%+v\n", sem.Stats())

	_ = sem.SetLimit(4) // unthrottle: 3 more may start now
	fmt.Printf("%+v\n", sem.Stats())

	tok.Release()
	if err := sem.WaitIdle(context.Background()); err == nil {
		fmt.Println("idle")
	}
	// Output:
	// {Available:1 Held:1 Limit:2 Max:8 Waiters:0 Closed:false}
	// {Available:3 Held:1 Limit:4 Max:8 Waiters:0 Closed:false}
	// idle
}

// A worker pool in the style of golang.org/x/sync/semaphore's example:
// start at most a fixed number of workers at once, and wait for all of
// them at the end, here with WaitIdle instead of acquiring every permit.
func Example_workerPool() {
	ctx := context.Background()
	const maxWorkers = 3
	sem := atomicsem.MustNew(maxWorkers, maxWorkers)

	out := make([]int, 10)
	for i := range out {
		// When maxWorkers goroutines are running, Acquire blocks until
		// one of them finishes.
		tok, err := sem.Acquire(ctx, 1)
		if err != nil {
			fmt.Printf("failed to acquire: %v\n", err)
			break
		}
		go func() {
			defer tok.Release()
			out[i] = collatzSteps(i + 1)
		}()
	}
	if err := sem.WaitIdle(ctx); err != nil {
		fmt.Printf("failed to wait: %v\n", err)
	}
	fmt.Println(out)
	// Output:
	// [0 1 7 2 5 8 16 3 19 6]
}

// collatzSteps computes the number of steps to reach 1 under the Collatz
// conjecture.
func collatzSteps(n int) (steps int) {
	for ; n > 1; steps++ {
		if n%2 == 0 {
			n /= 2
		} else {
			n = 3*n + 1
		}
	}
	return steps
}

// A budget of in-flight bytes: at most 512 MiB of request bodies are being
// processed at once, each request weighted by its size. A request larger
// than the whole budget is refused at once rather than waiting for ever.
// (Budgets above MaxPermits, about a gigabyte, are counted in KiB.)
func Example_inFlightBytes() {
	budget := atomicsem.MustNew(512<<20, 512<<20)

	// handle processes a request whose body is size bytes long.
	handle := func(ctx context.Context, size int64) error {
		tok, err := budget.Acquire(ctx, size)
		if err != nil {
			return err
		}
		defer tok.Release()
		// ... read and process the body, holding its bytes against the
		// budget ...
		return nil
	}

	fmt.Println(handle(context.Background(), 64<<20))
	fmt.Println(handle(context.Background(), 600<<20))
	// Output:
	// <nil>
	// atomicsem: exceeds the semaphore's maximum: requested 629145600, max 536870912
}

// Bound how many jobs run at once: each job holds a permit while it runs,
// and the loop waits for a free one before starting the next.
func ExampleSemaphore_Acquire() {
	sem := atomicsem.MustNew(2, 2)
	squares := make([]int, 5)
	var wg sync.WaitGroup
	for i := range squares {
		tok, err := sem.Acquire(context.Background(), 1)
		if err != nil {
			fmt.Println(err)
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer tok.Release()
			squares[i] = i * i
		}()
	}
	wg.Wait()
	fmt.Println(squares, "available:", sem.Stats().Available)
	// Output:
	// [0 1 4 9 16] available: 2
}

// Throttle a running system and unthrottle it again. Lowering the limit
// revokes nothing: the permits already out show as debt, and new acquirers
// wait until it is paid off or the limit goes back up.
func ExampleSemaphore_SetLimit() {
	sem := atomicsem.MustNew(4, 8)
	busy, _ := sem.TryAcquire(3)

	_ = sem.SetLimit(1)
	st := sem.Stats()
	fmt.Printf("throttled: limit %d, held %d, available %d\n", st.Limit, st.Held, st.Available)
	_, ok := sem.TryAcquire(1)
	fmt.Println("acquire while in debt:", ok)

	done := make(chan struct{})
	go func() {
		defer close(done)
		tok, err := sem.Acquire(context.Background(), 2)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("waiter got", tok.Permits(), "permits")
		tok.Release()
	}()

	busy.Release()
	fmt.Println("after release: available", sem.Stats().Available)

	_ = sem.SetLimit(6) // wakes the waiter at once
	<-done
	st = sem.Stats()
	fmt.Printf("unthrottled: limit %d, available %d\n", st.Limit, st.Available)
	// Output:
	// throttled: limit 1, held 3, available -2
	// acquire while in debt: false
	// after release: available 1
	// waiter got 2 permits
	// unthrottled: limit 6, available 6
}

// Top up credit that accrues to a ceiling: each tick adds what it earns,
// as far as the ceiling allows, however much was spent meanwhile. Spent
// credit is forgotten rather than released, since it is used up. (Package
// credit does this accrual lazily, without a ticker.)
func ExampleSemaphore_Refill() {
	credit := atomicsem.MustNew(0, 10)
	for range 3 { // three ticks of 4 credits
		fmt.Println("tick adds", credit.Refill(4))
	}

	burst, _ := credit.TryAcquire(7)
	burst.Forget()
	fmt.Println("after a burst of 7:", credit.Stats().Available)
	fmt.Println("tick adds", credit.Refill(4))
	// Output:
	// tick adds 4
	// tick adds 4
	// tick adds 2
	// after a burst of 7: 3
	// tick adds 4
}

// Add capacity in fixed steps, all or nothing: TryRelease refuses a step
// that would take the limit past the maximum, counting the permits in
// flight.
func ExampleSemaphore_TryRelease() {
	pool := atomicsem.MustNew(3, 8)
	inFlight, _ := pool.TryAcquire(3)

	fmt.Println("add 4:", pool.TryRelease(4))
	fmt.Println("add 4 more:", pool.TryRelease(4), "(limit", pool.Stats().Limit, "of 8)")
	fmt.Println("add 1:", pool.TryRelease(1))
	inFlight.Release()
	// Output:
	// add 4: true
	// add 4 more: false (limit 7 of 8)
	// add 1: true
}

// Gate a hot path: serve a request if a slot is free now, and reject it
// otherwise rather than queue it.
func ExampleSemaphore_TryAcquire() {
	gate := atomicsem.MustNew(2, 2)
	var inFlight []*token.Token
	serve := func(id int) {
		tok, ok := gate.TryAcquire(1)
		if !ok {
			fmt.Printf("request %d: rejected, busy\n", id)
			return
		}
		fmt.Printf("request %d: served\n", id)
		inFlight = append(inFlight, &tok)
	}

	for id := 1; id <= 3; id++ {
		serve(id)
	}
	inFlight[0].Release() // the first request completes
	serve(4)
	// Output:
	// request 1: served
	// request 2: served
	// request 3: rejected, busy
	// request 4: served
}

// Drain before shutdown: close the semaphore so that nothing new starts,
// then wait for the work in flight to finish, however the limit stands.
func ExampleSemaphore_WaitIdle() {
	sem := atomicsem.MustNew(4, 4)
	for i := range 3 {
		tok, _ := sem.TryAcquire(1)
		go func() {
			defer tok.Release()
			time.Sleep(time.Duration(i) * time.Millisecond) // work
		}()
	}
	_ = sem.SetLimit(0) // throttled to nothing: Acquire(ctx, 4) would hang

	sem.Close()
	_, err := sem.Acquire(context.Background(), 1)
	fmt.Println("new work:", err)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fmt.Println("drained:", sem.WaitIdle(ctx) == nil, "held:", sem.Stats().Held)
	// Output:
	// new work: atomicsem: semaphore is closed
	// drained: true held: 0
}

// Retire a permit for good: a pool of three connections loses one, so the
// limit drops to two until a replacement is opened.
func ExampleSemaphore_forget() {
	pool := atomicsem.MustNew(3, 3)

	conn, _ := pool.TryAcquire(1)
	conn.Forget() // the connection broke: do not hand it out again
	st := pool.Stats()
	fmt.Printf("after Forget: limit %d, available %d\n", st.Limit, st.Available)

	pool.TryRelease(1) // a replacement connection is open
	st = pool.Stats()
	fmt.Printf("after TryRelease: limit %d, available %d\n", st.Limit, st.Available)
	// Output:
	// after Forget: limit 2, available 2
	// after TryRelease: limit 3, available 3
}

// Declare a package-level semaphore without an error to ignore.
func ExampleMustNew() {
	var uploads = atomicsem.MustNew(4, 16)
	fmt.Println(uploads.Stats().Limit)
	// Output:
	// 4
}

// A gate on every request of a server with many cores: a limit in the
// thousands, with free permits cached per core, so that requests on
// different cores do not contend for one word. Lowering the limit, Close
// and WaitIdle see every permit, cached or not.
func ExampleWithPermitCache() {
	gate := atomicsem.MustNew(10_000, 10_000, atomicsem.WithPermitCache())

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				tok, ok := gate.TryAcquire(1)
				if !ok {
					continue // shed the request
				}
				tok.Release()
			}
		})
	}
	wg.Wait()
	fmt.Printf("%+v\n", gate.Stats())

	var held [3]token.Token
	for i := range held {
		held[i], _ = gate.TryAcquire(1)
	}
	_ = gate.SetLimit(2) // below what is held: new requests wait
	_, ok := gate.TryAcquire(1)
	fmt.Printf("%+v %v\n", gate.Stats(), ok)
	for i := range held {
		held[i].Release()
	}
	// Output:
	// {Available:10000 Held:0 Limit:10000 Max:10000 Waiters:0 Closed:false}
	// {Available:-1 Held:3 Limit:2 Max:10000 Waiters:0 Closed:false} false
}
