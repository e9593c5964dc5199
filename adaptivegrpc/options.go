package adaptivegrpc

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/atomicsem"
)

// An Option configures an interceptor.
type Option func(*config)

type config struct {
	lim      *adaptive.Limiter
	classify Classifier
	wait     bool
}

// WithClassifier makes the interceptor end each permit with classify's
// verdict instead of Classify's. It is a run-time error to pass nil.
func WithClassifier(classify Classifier) Option {
	if classify == nil {
		panic("adaptivegrpc: nil Classifier")
	}
	return func(c *config) { c.classify = classify }
}

// WithWait makes the interceptor wait for a slot (Limiter.Acquire, under
// the RPC's context) instead of shedding the RPC when the limit is reached.
// An RPC whose context is done while it waits fails with the context's code
// (DeadlineExceeded or Canceled), and one still waiting when the Limiter is
// closed with Unavailable; neither counts as an outcome.
func WithWait() Option {
	return func(c *config) { c.wait = true }
}

// newConfig applies opts; it panics on a nil Limiter, a caller's bug that
// would otherwise surface only at the first RPC.
func newConfig(lim *adaptive.Limiter, opts []Option) *config {
	if lim == nil {
		panic("adaptivegrpc: nil Limiter")
	}
	c := &config{lim: lim, classify: Classify}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// admit makes p a live permit for an RPC under ctx, or returns the error
// the RPC fails with: errLimited when it is shed, the context's status when
// ctx is done while it waits, Unavailable once the Limiter is closed.
func (c *config) admit(ctx context.Context, p *adaptive.Permit) error {
	if !c.wait {
		if c.lim.TryAcquire(p) {
			return nil
		}
		return errLimited
	}
	err := c.lim.Acquire(ctx, p)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, atomicsem.ErrClosed):
		return errClosed
	}
	return status.FromContextError(err).Err()
}

// errLimited is the error of a shed RPC. Its value is a zero-size struct
// and its status is built once, so shedding allocates nothing here.
var errLimited error = limitedError{}

var (
	limitedStatus = status.New(codes.ResourceExhausted, limitedError{}.Error())
	errClosed     = status.Error(codes.Unavailable, "adaptivegrpc: limiter closed")
)

// limitedError carries codes.ResourceExhausted for gRPC (status.Code, and
// the status a server sends) and adaptive.ErrLimited for errors.Is.
type limitedError struct{}

func (limitedError) Error() string              { return "adaptivegrpc: concurrency limit reached" }
func (limitedError) GRPCStatus() *status.Status { return limitedStatus }
func (limitedError) Unwrap() error              { return adaptive.ErrLimited }
