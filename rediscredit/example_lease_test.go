package rediscredit_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/atomicsem/atomicsem/rediscredit"
)

// A process that makes many calls a second to a partner API, shared by the
// fleet at 10,000 a second, leases the credit: most calls spend from the
// process's own pool, and a round trip to Redis takes a block for many.
// The fleet never exceeds the rate: what a pool holds is reserved in Redis.
func ExampleLimiter_Lease() {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  exampleAddr(),
		ContextTimeoutEnabled: true,
	})
	defer rdb.Close()
	partner, err := rediscredit.New(rdb, 10_000, 10_000)
	if err != nil {
		panic(err)
	}
	lease, err := partner.Lease("partner-api")
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	spent := 0
	for range 2_000 {
		if ok, err := lease.TrySpend(ctx, 1); err == nil && ok {
			spent++ // call the partner
		}
	}
	st := lease.Stats()
	fmt.Println("spent:", spent)
	fmt.Println("round trips under a tenth of the calls:", st.Calls*10 < int64(spent))
	// Close gives back what the pool has not spent.
	if err := lease.Close(ctx); err != nil {
		panic(err)
	}
	fmt.Println("reserved after Close:", lease.Stats().Reserved)
	// Output:
	// spent: 2000
	// round trips under a tenth of the calls: true
	// reserved after Close: 0
}
