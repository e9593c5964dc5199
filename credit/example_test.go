package credit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/atomicsem/atomicsem/credit"
)

// An API client allowed 10 requests a second with bursts of 100: Spend
// waits for a request's credit, in arrival order, and TrySpend refuses a
// request over the rate instead.
func Example_apiClient() {
	api := credit.MustNew(10, 100) // starts full: a burst of 100 is allowed at once

	ctx := context.Background()
	for range 100 {
		if err := api.Spend(ctx, 1); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("burst sent; another request now?", api.TrySpend(1))
	// Output:
	// burst sent; another request now? false
}

// A byte-rate shaper: 8 MiB/s, with bursts up to 64 MiB. Each write waits
// for credit for its bytes; a write larger than the burst could never be
// sent whole, and fails at once.
func Example_byteShaper() {
	const MiB = 1 << 20
	shaper := credit.MustNew(8*MiB, 64*MiB)

	ctx := context.Background()
	for _, size := range []int64{48 * MiB, 16 * MiB, 65 * MiB} {
		if err := shaper.Spend(ctx, size); err != nil {
			fmt.Println("write of", size/MiB, "MiB:", err)
			continue
		}
		fmt.Println("wrote", size/MiB, "MiB")
	}
	// Output:
	// wrote 48 MiB
	// wrote 16 MiB
	// write of 65 MiB: credit: 68157440 credits exceed the burst of 67108864
}

// Reserve, then settle: a caller that cannot know its cost up front
// reserves the most it may need, spends what it used, and gives back the
// rest with Split, so that the unused credit is there for the next caller
// at once rather than lost.
func Example_reserveThenSettle() {
	bucket := credit.MustNew(1, 10) // 1 credit a second, up to 10

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	tok, err := bucket.Acquire(ctx, 10) // the most a query may cost
	if err != nil {
		fmt.Println(err)
		return
	}
	used, _ := tok.Split(3) // it cost 3
	used.Forget()           // spent for good
	tok.Release()           // the other 7 go back
	fmt.Println("balance after the query:", bucket.Stats().Balance)
	// Output:
	// balance after the query: 7
}

// One configuration for many buckets: the rate's exact representation is
// worked out once, and each bucket made from it costs one allocation.
func ExampleConfig() {
	perClient := credit.MustConfig(5, 10) // 5 requests a second, bursts of 10
	alice, bob := perClient.MustNew(), perClient.MustNew()
	fmt.Println(alice.TrySpend(10), alice.TrySpend(1), bob.TrySpend(1))
	// Output:
	// true false true
}

// A bucket per key without a Bucket: a State per key and one Config. The
// caller serializes each State's methods (here, one goroutine) and passes
// the time from the Config's clock; a State that reports Full may be
// dropped, as the zero State is the same full bucket.
func ExampleState() {
	cfg := credit.MustConfig(1, 3) // 1 a second, bursts of 3
	keys := map[string]*credit.State{}
	allow := func(key string, now int64) bool {
		s, ok := keys[key]
		if !ok {
			s = new(credit.State) // the zero State: full
			keys[key] = s
		}
		return s.TrySpend(cfg, now, 1)
	}
	now := cfg.Now()
	for range 4 {
		fmt.Print(allow("10.0.0.1", now), " ")
	}
	fmt.Println(allow("10.0.0.2", now))
	later := now + int64(time.Second)
	fmt.Println("a second later:", allow("10.0.0.1", later))
	fmt.Println("10.0.0.2 full again, droppable:", keys["10.0.0.2"].Full(cfg, later))
	// Output:
	// true true true false true
	// a second later: true
	// 10.0.0.2 full again, droppable: true
}
