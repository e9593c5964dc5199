package adaptive_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/overload"
)

// Back off before the server has to shed: a client with a Throttle that
// sees its server reject every request rejects most of its own locally,
// with ErrThrottled, and sends only the few that tell it when the server
// can take more.
func ExampleTransport_throttle() {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	lim, _ := adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(10, 1, 100))
	defer lim.Close()
	throttle, _ := overload.NewThrottle(overload.DefaultThrottleK, time.Minute)
	client := &http.Client{Transport: &adaptive.Transport{Limiter: lim, Base: srv.Client().Transport, Throttle: throttle}}
	defer client.CloseIdleConnections()

	throttled := 0
	for range 300 {
		resp, err := client.Get(srv.URL)
		if errors.Is(err, adaptive.ErrThrottled) {
			throttled++
			continue
		}
		_ = resp.Body.Close()
	}
	// The n-th request goes out with probability 1/n: about six of 300.
	fmt.Println("all counted:", throttled+int(served.Load()) == 300)
	fmt.Println("fewer than 30 reached the server:", served.Load() < 30)
	// Output:
	// all counted: true
	// fewer than 30 reached the server: true
}

// Honour a server's Retry-After: until the time it names (here capped at
// a minute), requests fail at once with a *RetryAfterError that says how
// long is left, and the server hears nothing.
func ExampleTransport_retryAfter() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		http.Error(w, "overloaded", http.StatusTooManyRequests)
	}))
	defer srv.Close()

	lim, _ := adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(10, 1, 100))
	defer lim.Close()
	client := &http.Client{Transport: &adaptive.Transport{Limiter: lim, Base: srv.Client().Transport, MaxRetryAfter: time.Minute}}
	defer client.CloseIdleConnections()

	resp, _ := client.Get(srv.URL)
	_ = resp.Body.Close()
	fmt.Println(resp.StatusCode)
	_, err := client.Get(srv.URL)
	var ra *adaptive.RetryAfterError
	if errors.As(err, &ra) {
		fmt.Println("refused locally:", errors.Is(err, adaptive.ErrLimited), ra.RetryAfter > 29*time.Second && ra.RetryAfter <= 30*time.Second)
	}
	// Output:
	// 429
	// refused locally: true true
}
