package atomicsem_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// Bound how many jobs run at once: each job holds a permit while it runs,
// and the loop waits for a free one before starting the next.
func ExampleSemaphore_Acquire() {
	sem, err := atomicsem.New(2, 2)
	if err != nil {
		panic(err)
	}
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
	sem, _ := atomicsem.New(4, 8)
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

// Accrue burst credit: a client earns one request per tick while idle, up
// to a burst of 10, then spends its credit at once. Spent credit is
// forgotten rather than released, since it is used up.
func ExampleSemaphore_TryRelease() {
	credit, _ := atomicsem.New(0, 10)

	earned := 0
	for range 12 { // twelve idle ticks
		if credit.TryRelease(1) {
			earned++
		}
	}
	fmt.Println("earned", earned, "credits in 12 ticks")

	burst, ok := credit.TryAcquire(7)
	fmt.Println("burst of 7:", ok)
	burst.Forget()
	fmt.Println("credit left:", credit.Stats().Available)

	// Credit in flight counts against the ceiling too.
	inFlight, _ := credit.TryAcquire(3)
	fmt.Println("earn 8 more while 3 are in flight:", credit.TryRelease(8))
	fmt.Println("earn 7 more while 3 are in flight:", credit.TryRelease(7))
	inFlight.Forget()
	fmt.Println("credit left:", credit.Stats().Available)
	// Output:
	// earned 10 credits in 12 ticks
	// burst of 7: true
	// credit left: 3
	// earn 8 more while 3 are in flight: false
	// earn 7 more while 3 are in flight: true
	// credit left: 7
}

// Gate a hot path: serve a request if a slot is free now, and reject it
// otherwise rather than queue it.
func ExampleSemaphore_TryAcquire() {
	gate, _ := atomicsem.New(2, 2)
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

// Retire a permit for good: a pool of three connections loses one, so the
// limit drops to two until a replacement is opened.
func ExampleSemaphore_forget() {
	pool, _ := atomicsem.New(3, 3)

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
