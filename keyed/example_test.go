package keyed_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/atomicsem/atomicsem/keyed"
	"github.com/atomicsem/atomicsem/overload"
	"github.com/atomicsem/atomicsem/token"
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

// Priorities per tenant: each tenant's gate of 4 requests in flight keeps
// half for its critical requests, and its sheddable requests hold at most
// half, whatever the other tenants do.
func ExampleGates() {
	perTenant := keyed.MustNewGates(4, []overload.Class{
		{Name: "critical", Share: 0.5},
		{Name: "sheddable", MaxShare: 0.5},
	}, keyed.WithGateOptions(overload.WithMaxWait(100*time.Millisecond)))
	critical, _ := perTenant.Class("critical")
	sheddable, _ := perTenant.Class("sheddable")
	var held []*token.Token
	try := func(tenant string, class int) {
		tok, ok := perTenant.TryAcquire(tenant, class, 1)
		fmt.Println(tenant, class, ok)
		if ok {
			held = append(held, &tok)
		}
	}
	try("tenant-a", sheddable)
	try("tenant-a", sheddable)
	try("tenant-a", sheddable) // beyond its ceiling of 2
	try("tenant-a", critical)
	try("tenant-a", critical)
	try("tenant-a", critical) // the gate's 4 are taken
	try("tenant-b", sheddable)
	for _, tok := range held {
		tok.Release()
	}
	fmt.Println("tenants held:", perTenant.Len(), "after Sweep:", perTenant.Sweep(), perTenant.Len())
	// Output:
	// tenant-a 1 true
	// tenant-a 1 true
	// tenant-a 1 false
	// tenant-a 0 true
	// tenant-a 0 true
	// tenant-a 0 false
	// tenant-b 1 true
	// tenants held: 2 after Sweep: 2 0
}

// HTTP middleware: a gate per tenant, named by a header field, admits
// each request for the class in its X-Request-Class field.
func ExampleGatesMiddleware() {
	perTenant := keyed.MustNewGates(1, []overload.Class{{Name: "critical"}, {Name: "sheddable"}})
	h := keyed.GatesMiddleware(perTenant, keyed.WithKeyFunc(func(r *http.Request) string {
		return r.Header.Get("X-Tenant")
	}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		class, _ := overload.ClassFromContext(r.Context())
		fmt.Fprintln(w, "served as", class)
	}))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-Tenant", "acme")
	r.Header.Set("X-Request-Class", "critical")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Print(w.Code, " ", w.Body.String())

	// While acme's one permit is held, its next request waits, here
	// until its deadline, and is refused.
	tok, _ := perTenant.TryAcquire("acme", 0, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r.WithContext(ctx))
	fmt.Println(w.Code, "Retry-After:", w.Header().Get("Retry-After"))
	tok.Release()
	// Output:
	// 200 served as critical
	// 503 Retry-After: 1
}
