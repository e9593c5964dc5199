package etcdsem_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/atomicsem/atomicsem/etcdsem"
)

// A process that makes many calls a second to a partner that takes at most
// 50 at once across the fleet leases permits into itself: its goroutines
// take and give back permits in-process, and the pool holds them in etcd,
// so that the fleet never holds more than 50.
func ExampleNewPool() {
	cli, session := connect()
	defer cli.Close()
	defer session.Close()

	ctx := context.Background()
	partner, err := etcdsem.New(ctx, session, "/semaphores/partner", 50, 50)
	if err != nil {
		fmt.Println(err)
		return
	}
	pool, err := etcdsem.NewPool(partner)
	if err != nil {
		fmt.Println(err)
		return
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				tok, err := pool.Acquire(ctx, 1)
				if err != nil {
					fmt.Println(err) // ctx.Err(), etcdsem.ErrUnavailable, etcdsem.ErrSessionLost, ...
					return
				}
				// call the partner
				tok.Release()
			}
		})
	}
	wg.Wait()
	st := pool.Stats()
	fmt.Println("8,000 calls in fewer than 80 round trips:", st.Calls < 80)
	// The pool holds what its goroutines use in an interval, and never
	// more than the fleet's limit.
	fmt.Println("held in etcd, within the fleet's 50:", st.Held <= 50)
	// Close gives the pool's permits back to the fleet.
	if err := pool.Close(ctx); err != nil {
		fmt.Println(err)
	}
	fleet, _ := partner.Stats(ctx)
	fmt.Println("held after Close:", fleet.Held)
	// Output:
	// 8,000 calls in fewer than 80 round trips: true
	// held in etcd, within the fleet's 50: true
	// held after Close: 0
}
