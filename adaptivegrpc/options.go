package adaptivegrpc

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
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
	pushback metadata.MD // the trailer of a shed RPC, for the server interceptors
}

// DefaultRetryPushback is the retry hint a server interceptor sends with an
// RPC it sheds, as adaptive.Handler's Retry-After does: a second.
const DefaultRetryPushback = time.Second

// pushbackKey is the trailer in which a server tells a gRPC client how long
// to wait before it retries (gRFC A6, client retries); grpc-go's retry
// reads it, in place of its own backoff, from a response that is only
// trailers, as a shed RPC's is.
const pushbackKey = "grpc-retry-pushback-ms"

// WithRetryPushback makes the server interceptors tell a client whose RPC
// they shed to wait d before it retries, in place of DefaultRetryPushback:
// the trailer grpc-retry-pushback-ms carries d in milliseconds, rounded up.
// A negative d sends -1, which tells a grpc-go client not to retry at all.
// The hint reaches a client that retries by a service config's retry
// policy for ResourceExhausted; the client interceptors, which shed before
// the network, ignore it.
func WithRetryPushback(d time.Duration) Option {
	md := pushbackTrailer(d)
	return func(c *config) { c.pushback = md }
}

// pushbackTrailer returns the trailer that asks a client to wait d.
func pushbackTrailer(d time.Duration) metadata.MD {
	ms := int64(-1)
	if d >= 0 {
		ms = int64((d + time.Millisecond - 1) / time.Millisecond)
	}
	return metadata.Pairs(pushbackKey, strconv.FormatInt(ms, 10))
}

// defaultPushback is the trailer of DefaultRetryPushback, built once; grpc
// copies a trailer into the stream's, so one map serves every RPC.
var defaultPushback = pushbackTrailer(DefaultRetryPushback)

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

// newConfig applies opts; it panics on a nil Limiter or Option, a caller's
// bug that would otherwise surface only at the first RPC.
func newConfig(lim *adaptive.Limiter, opts []Option) *config {
	if lim == nil {
		panic("adaptivegrpc: nil Limiter")
	}
	c := &config{lim: lim, classify: Classify, pushback: defaultPushback}
	for _, opt := range opts {
		if opt == nil {
			panic("adaptivegrpc: nil Option")
		}
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
