package adaptive_test

import (
	"context"
	"expvar"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/atomicsem/atomicsem/adaptive"
)

// Shed the requests a service cannot take: TryAcquire admits a request
// while the limit allows, and the outcome recorded at the end teaches the
// controller where the limit should be.
func ExampleLimiter_TryAcquire() {
	lim, err := adaptive.New(&adaptive.Gradient2{}, adaptive.WithLimits(2, 1, 100))
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	var a, b, c adaptive.Permit
	fmt.Println(lim.TryAcquire(&a), lim.TryAcquire(&b), lim.TryAcquire(&c))
	a.Succeeded() // completed: its round trip is a sample
	b.Dropped()   // timed out: a sign of overload
	st := lim.Stats()
	fmt.Printf("in flight %d, success %d, dropped %d, rejected %d\n", st.InFlight, st.Succeeded, st.Dropped, st.Rejected)
	// Output:
	// true true false
	// in flight 0, success 1, dropped 1, rejected 1
}

// Wait for a slot instead of shedding: Acquire returns when a request
// ends, or with the context's error.
func ExampleLimiter_Acquire() {
	lim, _ := adaptive.New(nil, adaptive.WithLimits(1, 1, 10))
	defer lim.Close()

	var first adaptive.Permit
	_ = lim.Acquire(context.Background(), &first)
	go func() {
		time.Sleep(10 * time.Millisecond)
		first.Succeeded()
	}()
	var second adaptive.Permit
	if err := lim.Acquire(context.Background(), &second); err != nil {
		fmt.Println(err)
		return
	}
	defer second.Succeeded()

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	var third adaptive.Permit
	fmt.Println(lim.Acquire(ctx, &third))
	// Output:
	// context deadline exceeded
}

// Publish a limiter's state for metrics: expvar serves it as JSON at
// /debug/vars, next to the process's other variables.
func ExampleLimiter_Stats() {
	lim, _ := adaptive.New(&adaptive.AIMD{Timeout: 100 * time.Millisecond}, adaptive.WithLimits(20, 1, 200))
	defer lim.Close()
	expvar.Publish("api_limiter", expvar.Func(func() any { return lim.Stats() }))

	var p adaptive.Permit
	lim.TryAcquire(&p)
	p.Ignored()
	fmt.Println(expvar.Get("api_limiter").String())
	// Output:
	// {"Limit":20,"InFlight":0,"Waiters":0,"LastRTT":0,"Succeeded":0,"Dropped":0,"Ignored":1,"Rejected":0,"Closed":false}
}

// Keep a latency histogram of the requests a limiter admits, by how they
// ended: the observer is told of each permit as it ends. (Package
// adaptiveotel records an OpenTelemetry histogram this way.)
func ExampleLimiter_Observe() {
	lim, _ := adaptive.New(nil)
	defer lim.Close()
	var mu sync.Mutex
	underASecond := map[adaptive.Outcome]int{}
	stop, err := lim.Observe(func(o adaptive.Outcome, rtt time.Duration) {
		if rtt < time.Second {
			mu.Lock()
			underASecond[o]++
			mu.Unlock()
		}
	})
	if err != nil {
		panic(err)
	}
	defer stop()

	for _, o := range []adaptive.Outcome{adaptive.Succeeded, adaptive.Succeeded, adaptive.Dropped} {
		var p adaptive.Permit
		lim.TryAcquire(&p)
		p.End(o)
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Println("under a second: succeeded", underASecond[adaptive.Succeeded], "dropped", underASecond[adaptive.Dropped])

	_, err = lim.Observe(func(adaptive.Outcome, time.Duration) {})
	fmt.Println(err)
	// Output:
	// under a second: succeeded 2 dropped 1
	// adaptive: the limiter has an observer already
}

// An adaptive limit for an HTTP server: requests past the limit get 503
// Service Unavailable at once, instead of queueing until they time out.
func ExampleHandler() {
	lim, _ := adaptive.New(&adaptive.Gradient2{}, adaptive.WithLimits(20, 1, 500))
	defer lim.Close()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello")
	})
	srv := httptest.NewServer(adaptive.Handler(lim, api))
	defer srv.Close()

	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	srv.Client().CloseIdleConnections()
	fmt.Println(resp.StatusCode, string(body), lim.Stats().Succeeded)
	// Output:
	// 200 hello 1
}

// Limit a client's requests to a server it shares with others: the limit
// backs off when the server answers 429 or 503 or times out, and grows
// while it answers promptly.
func ExampleTransport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	lim, _ := adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(2, 1, 100))
	defer lim.Close()
	client := &http.Client{Transport: &adaptive.Transport{Limiter: lim, Base: srv.Client().Transport}}
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = resp.Body.Close()
	st := lim.Stats()
	fmt.Println(resp.StatusCode, "limit", st.Limit, "dropped", st.Dropped)
	// Output:
	// 503 limit 1 dropped 1
}

// stepDown is a controller of one's own: it halves the limit on a drop and
// otherwise raises it by one. Any type with a Next method will do.
type stepDown struct{}

func (stepDown) Next(limit float64, s adaptive.Sample) float64 {
	if s.Dropped {
		return limit / 2
	}
	return limit + 1
}

// Write a controller of your own: the limiter calls Next under its lock,
// clamps the answer to its bounds and applies it.
func ExampleController() {
	lim, _ := adaptive.New(stepDown{}, adaptive.WithLimits(8, 1, 10))
	defer lim.Close()
	var p adaptive.Permit
	for _, drop := range []bool{false, true, true, true, true} {
		lim.TryAcquire(&p)
		if drop {
			p.Dropped()
		} else {
			p.Succeeded()
		}
		fmt.Print(lim.Stats().Limit, " ")
	}
	fmt.Println()
	// Output:
	// 9 4 2 1 1
}
