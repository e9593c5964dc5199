package keyed_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/atomicsem/atomicsem/keyed"
)

// A limit per client: each key gets a bucket of 3 requests that refills at
// one request a second, and an idle client costs no memory.
func ExampleLimiter() {
	perClient := keyed.MustNewLimiter(1, 3, keyed.WithMaxKeys(100_000))
	for i := range 4 {
		fmt.Println("alice", i, perClient.TrySpend("alice", 1))
	}
	fmt.Println("bob", perClient.TrySpend("bob", 1))
	// Output:
	// alice 0 true
	// alice 1 true
	// alice 2 true
	// alice 3 false
	// bob true
}

// A concurrency limit per tenant: at most 2 requests of a tenant in
// flight, raised for one tenant.
func ExampleSemaphores() {
	perTenant := keyed.MustNewSemaphores(2, keyed.WithMaxLimit(8))
	ctx := context.Background()
	a, _ := perTenant.Acquire(ctx, "tenant-a", 1)
	b, _ := perTenant.Acquire(ctx, "tenant-a", 1)
	_, ok := perTenant.TryAcquire("tenant-a", 1)
	fmt.Println("a third in flight:", ok)

	_ = perTenant.SetKeyLimit("tenant-a", 3)
	c, ok := perTenant.TryAcquire("tenant-a", 1)
	fmt.Println("after raising tenant-a's limit:", ok)
	a.Release()
	b.Release()
	c.Release()
	// Output:
	// a third in flight: false
	// after raising tenant-a's limit: true
}

// HTTP middleware: two requests a minute per client address, with the
// rate-limit fields on every response and 429 beyond the limit.
func ExampleMiddleware() {
	perClient := keyed.MustNewLimiter(1.0/30, 2)
	h := keyed.Middleware(perClient)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))
	for range 3 {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "198.51.100.7:51234"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n",
			w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Println("RateLimit-Policy:", w.Header().Get("RateLimit-Policy"))
	// Output:
	// 200 RateLimit: "default";r=1;t=30 Retry-After: ""
	// 200 RateLimit: "default";r=0;t=60 Retry-After: ""
	// 429 RateLimit: "default";r=0;t=30 Retry-After: "30"
	// RateLimit-Policy: "default";q=2;w=60
}
