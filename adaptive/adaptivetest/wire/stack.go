package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/atomicsem/atomicsem/adaptive"
)

// A Stack carries requests from clients to a Backend through a Limiter, as
// a deployment does: Start serves b on n with lim in the place the Stack
// puts it, and returns the Client that makes one request and the function
// that stops what Start started, which returns once every handler has.
type Stack struct {
	Name  string
	Start func(n Network, lim *adaptive.Limiter, b *Backend) (Client, func())
}

// A Client makes one request under ctx and returns how it ended. It must
// return once ctx is done.
type Client func(ctx context.Context) Answer

// Handler is the Stack of a server limited by adaptive.Handler: an HTTP
// server of b inside adaptive.Handler, and an HTTP/1.1 client.
var Handler = Stack{Name: "Handler", Start: func(n Network, lim *adaptive.Limiter, b *Backend) (Client, func()) {
	dial, stop := serveHTTP(n, adaptive.Handler(lim, b))
	tr := newTransport(dial)
	return httpClient(&http.Client{Transport: tr}), func() {
		tr.CloseIdleConnections()
		stop()
	}
}}

// Transport is the Stack of a client limited by adaptive.Transport: an
// HTTP server of b, and a client whose transport is an adaptive.Transport
// that sheds with ErrLimited.
var Transport = Stack{Name: "Transport", Start: func(n Network, lim *adaptive.Limiter, b *Backend) (Client, func()) {
	dial, stop := serveHTTP(n, b)
	tr := newTransport(dial)
	return httpClient(&http.Client{Transport: &adaptive.Transport{Limiter: lim, Base: tr}}), func() {
		tr.CloseIdleConnections()
		stop()
	}
}}

// serveHTTP serves h on a listener of n and returns the function that
// dials it and the one that stops the server, closing its connections and
// waiting for its handlers to return.
func serveHTTP(n Network, h http.Handler) (func(context.Context) (net.Conn, error), func()) {
	lis, dial := n.Listen()
	var handlers running
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.add(1)
		defer handlers.add(-1)
		h.ServeHTTP(w, r)
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	return dial, func() {
		_ = srv.Close()
		<-served
		handlers.wait()
	}
}

// running counts the handlers running. A sync.WaitGroup would not do: a
// handler may start, on a connection the server read a request from just
// before it closed, while stop waits.
type running struct {
	mu sync.Mutex
	n  int
}

func (r *running) add(d int) {
	r.mu.Lock()
	r.n += d
	r.mu.Unlock()
}

// wait returns once no handler runs, polling every millisecond: the
// handlers of a closed server return within a few.
func (r *running) wait() {
	for {
		r.mu.Lock()
		n := r.n
		r.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// newTransport returns an HTTP/1.1 transport over dial that keeps enough
// idle connections for every request the scenarios have in flight at
// once, so that a connection is opened only to replace one a cancelled
// request closed.
func newTransport(dial func(context.Context) (net.Conn, error)) *http.Transport {
	return &http.Transport{
		MaxIdleConnsPerHost: 4096,
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
	}
}

// httpClient returns a Client that GETs the backend with c and reads the
// answer from the status: 200 OK, 500 Error, 503 Overloaded from the
// backend (no Retry-After) or Shed from a limiter (Retry-After).
func httpClient(c *http.Client) Client {
	return func(ctx context.Context) Answer {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://backend/", nil)
		if err != nil {
			panic("wire: " + err.Error())
		}
		resp, err := c.Do(req)
		switch {
		case errors.Is(err, adaptive.ErrLimited):
			return Shed
		case err != nil && ctx.Err() != nil:
			return Gone
		case err != nil:
			return Failed
		}
		_, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		switch {
		case err != nil && ctx.Err() != nil:
			return Gone
		case err != nil:
			return Failed
		}
		switch resp.StatusCode {
		case http.StatusOK:
			return OK
		case http.StatusServiceUnavailable:
			if resp.Header.Get("Retry-After") != "" {
				return Shed
			}
			return Overloaded
		}
		return Error
	}
}
