package rediscredit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomicsem/atomicsem/rediscredit"
)

// Every process of a fleet limits each customer to 10 requests a second,
// with bursts of 20, in one bucket per customer kept in Redis. The example
// needs a Redis server, so it is compiled but not run (it has no Output
// line); the tests run the same calls against a real server.
func Example() {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "localhost:6379",
		ContextTimeoutEnabled: true, // a call ends at its context's deadline
	})
	defer rdb.Close()
	perCustomer, err := rediscredit.New(rdb, 10, 20)
	if err != nil {
		panic(err)
	}

	handle := func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 50*time.Millisecond)
		defer cancel()
		res, err := perCustomer.TrySpend(ctx, "customer:"+r.Header.Get("X-Customer"), 1)
		switch {
		case errors.Is(err, rediscredit.ErrUnavailable):
			http.Error(w, "try again", http.StatusServiceUnavailable) // fail closed
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case !res.OK:
			w.Header().Set("Retry-After", fmt.Sprint(int(res.Wait.Seconds())+1))
			http.Error(w, "slow down", http.StatusTooManyRequests)
		default:
			fmt.Fprintln(w, "ok")
		}
	}
	_ = handle
}

// A batch job shapes its calls to a partner API to 100 a second across
// every worker: Spend waits for its credit, in the order the workers
// claimed it.
func ExampleLimiter_Spend() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	partner, _ := rediscredit.New(rdb, 100, 1)
	ctx := context.Background()
	for range 1000 {
		if _, err := partner.Spend(ctx, "partner:geocoder", 1); err != nil {
			return // ctx.Err(), or rediscredit.ErrUnavailable
		}
		// call the partner
	}
}

// Reserve-then-settle: reserve the most a response may cost, and spend
// what it did cost once it is known; the rest goes back to the bucket,
// never above the burst.
func ExampleReservation_Settle() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	tokens, _ := rediscredit.New(rdb, 1000, 8000) // model tokens a second, per tenant
	ctx := context.Background()
	r, res, err := tokens.TryReserve(ctx, "tokens:{tenant42}", 4000)
	if err != nil || !res.OK {
		return
	}
	used := int64(1234) // what the work turned out to cost
	_, _ = r.Settle(ctx, used)
}

// Fail-open: while Redis is unreachable, each of the fleet's 4 processes
// spends from a bucket of its own at a quarter of the rate.
func ExampleWithFallback() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	l, _ := rediscredit.New(rdb, 100, 100, rediscredit.WithFallback(0.25))
	res, err := l.TrySpend(context.Background(), "search", 1)
	if err == nil && res.Local {
		fmt.Println("decided locally: Redis is unavailable")
	}
}
