package rediscredit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomicsem/atomicsem/rediscredit"
)

// Every process of a fleet limits each customer to a request a minute,
// with bursts of 2, in one bucket per customer kept in Redis. (The
// examples run against a redis-server their test starts: exampleAddr is
// its address, "localhost:6379" or the like in a program of one's own.)
func Example() {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  exampleAddr(),
		ContextTimeoutEnabled: true, // a call ends at its context's deadline
	})
	defer rdb.Close()
	perCustomer, err := rediscredit.New(rdb, 1.0/60, 2)
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
			w.Header().Set("Retry-After", fmt.Sprint(math.Ceil(res.Wait.Seconds())))
			http.Error(w, "slow down", http.StatusTooManyRequests)
		default:
			fmt.Fprintln(w, "ok")
		}
	}

	for _, customer := range []string{"acme", "acme", "acme", "globex"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Customer", customer)
		w := httptest.NewRecorder()
		handle(w, r)
		if ra := w.Header().Get("Retry-After"); ra != "" {
			fmt.Println(customer, w.Code, "Retry-After:", ra)
		} else {
			fmt.Println(customer, w.Code)
		}
	}
	// Output:
	// acme 200
	// acme 200
	// acme 429 Retry-After: 60
	// globex 200
}

// A batch job shapes its calls to a partner API to 100 a second across
// every worker: Spend waits for its credit, in the order the workers
// claimed it.
func ExampleLimiter_Spend() {
	rdb := redis.NewClient(&redis.Options{Addr: exampleAddr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	partner, _ := rediscredit.New(rdb, 100, 1)
	ctx := context.Background()
	start := time.Now()
	calls := 0
	for range 6 {
		if _, err := partner.Spend(ctx, "partner:geocoder", 1); err != nil {
			fmt.Println(err) // ctx.Err(), or rediscredit.ErrUnavailable
			return
		}
		calls++ // call the partner
	}
	// The first call spends the burst; each of the other five waits 10ms.
	fmt.Println(calls, "calls, the last after at least 50ms:", time.Since(start) >= 50*time.Millisecond)
	// Output:
	// 6 calls, the last after at least 50ms: true
}

// Reserve-then-settle: reserve the most a response may cost, and spend
// what it did cost once it is known; the rest goes back to the bucket,
// never above the burst.
func ExampleReservation_Settle() {
	rdb := redis.NewClient(&redis.Options{Addr: exampleAddr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	tokens, _ := rediscredit.New(rdb, 1000, 8000) // model tokens a second, per tenant
	ctx := context.Background()
	r, res, err := tokens.TryReserve(ctx, "tokens:{tenant42}", 4000)
	if err != nil || !res.OK {
		fmt.Println("not now:", err)
		return
	}
	fmt.Println("reserved", r.Credit(), "of which", res.Reserved, "held, balance", res.Balance)
	used := int64(1234) // what the work turned out to cost
	res, err = r.Settle(ctx, used)
	if err != nil {
		fmt.Println(err)
		return
	}
	// 8000 less the 1234 spent, and whatever accrued meanwhile, never
	// above the burst.
	fmt.Println("held", res.Reserved, "balance at least", 8000-used, ":", res.Balance >= 8000-used)
	// Output:
	// reserved 4000 of which 4000 held, balance 4000
	// held 0 balance at least 6766 : true
}

// Fail-open: while Redis is unreachable, each of the fleet's 4 processes
// spends from a bucket of its own at a quarter of the rate and burst.
func ExampleWithFallback() {
	rdb := redis.NewClient(&redis.Options{Addr: exampleDownAddr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	defer rdb.Close()
	l, _ := rediscredit.New(rdb, 100, 100, rediscredit.WithFallback(0.25))
	res, err := l.TrySpend(context.Background(), "search", 1)
	if err == nil && res.Local {
		fmt.Println("decided locally: Redis is unavailable; balance", res.Balance)
	}
	// Output:
	// decided locally: Redis is unavailable; balance 24
}
