package overload_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/atomicsem/atomicsem/overload"
)

// A service runs at most 100 requests at once. Interactive requests come
// first and are guaranteed 80 of them; batch requests may use whatever the
// interactive ones leave idle, but never more than half of the limit.
func Example() {
	gate, err := overload.New(100, 100, []overload.Class{
		{Name: "interactive", Share: 0.8},
		{Name: "batch", MaxShare: 0.5},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	tok, err := gate.Acquire(ctx, 0, 1) // an interactive request
	if err != nil {
		return // shed, or ctx done
	}
	defer tok.Release()

	st := gate.Stats()
	for _, c := range st.Classes {
		fmt.Printf("%s: holds %d, reserve %d, ceiling %d\n", c.Name, c.Held, c.Reserve, c.Ceiling)
	}
	// Output:
	// interactive: holds 1, reserve 80, ceiling 100
	// batch: holds 0, reserve 0, ceiling 50
}

// The queue discipline: at most 2 waiters, and none waits longer than
// a second. A critical request arriving at a full queue pushes out the
// sheddable waiter.
func Example_queueDiscipline() {
	gate := overload.MustNew(1, 1, []overload.Class{{Name: "critical"}, {Name: "sheddable"}},
		overload.WithMaxQueue(2), overload.WithMaxWait(time.Second))
	ctx := context.Background()
	busy, _ := gate.TryAcquire(0, 1)

	errs := make(chan error, 3)
	wait := func(class int) {
		tok, err := gate.Acquire(ctx, class, 1)
		if err == nil {
			tok.Release()
		}
		errs <- err
	}
	go wait(1)
	go wait(1)
	for gate.Stats().Waiters < 2 {
		time.Sleep(time.Millisecond)
	}
	go wait(0) // the queue is full: one sheddable waiter makes room
	fmt.Println(<-errs)
	busy.Release() // the critical request is served first
	fmt.Println(<-errs)
	fmt.Println(<-errs)
	// Output:
	// overload: queue full
	// <nil>
	// <nil>
}

// A client throttles itself when its backend rejects requests for
// overload: here the backend accepted none of the last 100, so the client
// sends only about one request in 100 on to it.
func ExampleThrottle() {
	th, err := overload.NewThrottle(overload.DefaultThrottleK, time.Minute)
	if err != nil {
		panic(err)
	}
	for range 100 {
		if th.Allow() {
			// Send the request. It was rejected with 503, so Accepted is
			// not called.
		}
	}
	fmt.Printf("%.2f\n", th.Probability())
	th.Accepted()
	th.Accepted()
	req, acc := th.Counts()
	fmt.Println(req, acc)
	// Output:
	// 0.99
	// 100 2
}

// HTTP requests carry their class in the X-Request-Class header, set by
// the proxy in front of the service; a request without one is sheddable.
func ExampleMiddleware() {
	gate := overload.MustNew(100, 100, []overload.Class{{Name: "critical"}, {Name: "sheddable"}})
	handler := overload.Middleware(gate)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		class, _ := overload.ClassFromContext(r.Context())
		fmt.Fprintf(w, "served as %s", class)
	}))
	srv := httptest.NewServer(handler)
	defer srv.Close()

	for _, class := range []string{"critical", ""} {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		if class != "" {
			req.Header.Set(overload.DefaultClassHeader, class)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(string(body))
	}
	// Output:
	// served as critical
	// served as sheddable
}

// Every shed matches ErrShed, so one test answers them all alike.
func ExampleErrShed() {
	for _, err := range []error{overload.ErrQueueFull, overload.ErrMaxWait, overload.ErrDropped, overload.ErrDeadline, context.Canceled} {
		fmt.Println(errors.Is(err, overload.ErrShed))
	}
	// Output:
	// true
	// true
	// true
	// true
	// false
}
