package wire

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Backend is a service in real time: Workers workers, each taking
// ServiceTime per request (or what the Phase in force says instead). A
// request waits for a worker in a first-in, first-out queue and is answered
// Overloaded (a 503) once it has waited QueueTimeout; a request whose
// context ends leaves the queue, or frees its worker, at once, as a server
// that passes its context to its work does.
//
// A Backend is safe for concurrent use. Create one with NewBackend.
type Backend struct {
	workers      chan struct{} // a value per busy worker
	serviceTime  time.Duration
	queueTimeout time.Duration
	phase        atomic.Pointer[Phase]

	mu  sync.Mutex
	rng *rand.Rand // guarded by mu; seeded, so that a run in fake time draws alike each time
}

// NewBackend returns a healthy Backend of workers workers taking
// serviceTime per request, which answers Overloaded a request that has
// waited queueTimeout for a worker.
func NewBackend(workers int, serviceTime, queueTimeout time.Duration) *Backend {
	b := &Backend{workers: make(chan struct{}, workers), serviceTime: serviceTime, queueTimeout: queueTimeout,
		rng: rand.New(rand.NewPCG(3, 4))}
	b.phase.Store(&Phase{})
	return b
}

// Set makes the backend serve as p says from now on: its Fault, Latency,
// Errors, Slow and SlowTime. The other fields of p are the clients'.
func (b *Backend) Set(p Phase) { b.phase.Store(&p) }

// Serve serves one request under ctx and returns its answer: OK, Error,
// Overloaded, or Gone when ctx ended first.
func (b *Backend) Serve(ctx context.Context) Answer {
	ph := b.phase.Load()
	switch ph.Fault {
	case FailFast:
		return Overloaded
	case Hang:
		<-ctx.Done()
		return Gone
	case HangDeadline:
		t := time.NewTimer(b.queueTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			return Overloaded
		case <-ctx.Done():
			return Gone
		}
	case Instant:
		return OK
	}
	b.mu.Lock()
	failed, slow := b.rng.Float64() < ph.Errors, b.rng.Float64() < ph.Slow
	b.mu.Unlock()
	if failed {
		return Error
	}
	svc := time.Duration(float64(b.serviceTime) * orOne(ph.Latency))
	if slow {
		svc = ph.SlowTime
	}

	t := time.NewTimer(b.queueTimeout)
	defer t.Stop()
	select {
	case b.workers <- struct{}{}:
	case <-t.C:
		return Overloaded
	case <-ctx.Done():
		return Gone
	}
	defer func() { <-b.workers }()
	t.Reset(svc)
	select {
	case <-t.C:
		return OK
	case <-ctx.Done():
		return Gone
	}
}

// ServeHTTP serves a request with Serve and answers 200 for OK, 500 for
// Error and 503 for Overloaded (without a Retry-After header, by which a
// client tells it from a limiter's 503), and nothing once the request's
// context has ended.
func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch b.Serve(r.Context()) {
	case OK:
		_, _ = w.Write([]byte("ok"))
	case Error:
		w.WriteHeader(http.StatusInternalServerError)
	case Overloaded:
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

// Answer is how a request ended, as its client saw it.
type Answer uint8

const (
	// OK is a successful answer.
	OK Answer = iota
	// Error is an answer that reports a failure of the request other
	// than overload: a 500, or a gRPC status other than those below.
	Error
	// Overloaded is the backend's answer to a request it could not take:
	// a 503 without Retry-After, or Unavailable.
	Overloaded
	// Shed is a limiter's refusal: a 503 with Retry-After,
	// adaptive.ErrLimited, or ResourceExhausted.
	Shed
	// Gone is a request whose client stopped waiting: its timeout, its
	// deadline or its cancellation came first.
	Gone
	// Failed is a request that got no answer for another reason: a
	// refused or reset connection.
	Failed
	answers
)

// String returns the answer's name.
func (a Answer) String() string {
	switch a {
	case OK:
		return "ok"
	case Error:
		return "error"
	case Overloaded:
		return "overloaded"
	case Shed:
		return "shed"
	case Gone:
		return "gone"
	case Failed:
		return "failed"
	}
	return "answer?"
}

func orOne(v float64) float64 {
	if v == 0 {
		return 1
	}
	return v
}
