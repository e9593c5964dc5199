package adaptivegrpc

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/overload"
)

// ClassKey is the metadata key that carries an RPC's class: the client
// interceptors send the class of a call whose context has one
// (overload.ContextWithClass), and the server interceptors put the class
// an RPC carries into its handler's context, where
// overload.ClassFromContext reads it. It is the lower-case form of
// overload.DefaultClassHeader, as gRPC metadata keys are lower-case.
const ClassKey = "x-request-class"

// WithThrottle makes the client interceptors throttle the client with t,
// the Google SRE rule (overload.Throttle): each call counts as a request
// before the Limiter, and one that t rejects fails at once, without a
// permit and without the network, with codes.ResourceExhausted and an
// error that errors.Is reports as adaptive.ErrThrottled and
// adaptive.ErrLimited. A call counts as accepted unless it ends with
// ResourceExhausted or Unavailable, the server's refusals (or a server out
// of reach). The server interceptors ignore it. It is a run-time error to
// pass a nil t.
func WithThrottle(t *overload.Throttle) Option {
	if t == nil {
		panic("adaptivegrpc: WithThrottle: nil Throttle")
	}
	return func(c *config) { c.throttle = t }
}

// WithMaxRetryPushback makes the client interceptors honour the retry hint
// of a server that refused a call (the trailer grpc-retry-pushback-ms,
// which the server interceptors send, with ResourceExhausted or
// Unavailable): until the hint's time has passed, or max if that ends
// first, every call fails at once, without a permit and without the
// network, with codes.ResourceExhausted and an error that wraps an
// *adaptive.RetryAfterError with the time left (errors.As finds it; it
// matches adaptive.ErrLimited). Of two hints, the later end stands. A
// negative hint, which tells grpc-go's retry not to retry, starts no wait.
// Without this option, or with a max of zero or less, the hint is left to
// grpc-go's retry. The server interceptors ignore it.
func WithMaxRetryPushback(max time.Duration) Option {
	return func(c *config) { c.maxPushback = max }
}

// refuse returns the error of a call refused before the Limiter, or nil:
// while a pushback runs (not counted by the Throttle, as the client sends
// nothing), or when the Throttle rejects it.
func (c *config) refuse() error {
	if c.maxPushback > 0 {
		if left := c.pushbackLeft(); left > 0 {
			return pushbackError{&adaptive.RetryAfterError{RetryAfter: left}}
		}
	}
	if c.throttle != nil && !c.throttle.Allow() {
		return errThrottled
	}
	return nil
}

// rejected reports whether err is a server's refusal, for the Throttle and
// the pushback.
func rejected(err error) bool {
	if err == nil {
		return false
	}
	switch code(err) {
	case codes.ResourceExhausted, codes.Unavailable:
		return true
	}
	return false
}

// accept tells the Throttle of a call that ended with err, unless err is a
// refusal.
func (c *config) accept(err error) {
	if c.throttle != nil && !rejected(err) {
		c.throttle.Accepted()
	}
}

// notePushback starts the wait that the trailer of a call refused with err
// asks for.
func (c *config) notePushback(err error, trailer metadata.MD) {
	if c.maxPushback <= 0 || !rejected(err) {
		return
	}
	v := trailer.Get(pushbackKey)
	if len(v) == 0 {
		return
	}
	ms, perr := strconv.ParseInt(v[0], 10, 64)
	if perr != nil || ms <= 0 {
		return
	}
	d := c.maxPushback
	if ms < int64(d/time.Millisecond) {
		d = time.Duration(ms) * time.Millisecond
	}
	end := time.Now().UnixNano() + int64(d)
	for {
		old := c.retryUntil.Load()
		if old >= end || c.retryUntil.CompareAndSwap(old, end) {
			return
		}
	}
}

// pushbackLeft returns the time left of the pushback, or 0. A wait that
// seems longer than the maximum (the wall clock stepped back since it
// began) is over.
func (c *config) pushbackLeft() time.Duration {
	end := c.retryUntil.Load()
	if end == 0 {
		return 0
	}
	left := time.Duration(end - time.Now().UnixNano())
	if left <= 0 || left > c.maxPushback {
		return 0
	}
	return left
}

// trailerOption returns, when the pushback is honoured, callOpts with one
// more that stores the call's trailer, and where; otherwise callOpts as
// they are and nil, so that a call allocates nothing for it.
func (c *config) trailerOption(callOpts []grpc.CallOption) ([]grpc.CallOption, *metadata.MD) {
	if c.maxPushback <= 0 {
		return callOpts, nil
	}
	md := new(metadata.MD)
	return append(callOpts[:len(callOpts):len(callOpts)], grpc.Trailer(md)), md
}

// sendClass returns ctx with the class it carries in its outgoing
// metadata, unless the metadata names a class already.
func sendClass(ctx context.Context) context.Context {
	class, ok := overload.ClassFromContext(ctx)
	if !ok {
		return ctx
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md.Get(ClassKey)) > 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, ClassKey, class)
}

// receiveClass returns ctx carrying the class the RPC's metadata names, if
// it names one.
func receiveClass(ctx context.Context) context.Context {
	if v := metadata.ValueFromIncomingContext(ctx, ClassKey); len(v) > 0 && v[0] != "" {
		return overload.ContextWithClass(ctx, v[0])
	}
	return ctx
}

// classStream is a server stream whose context carries the RPC's class.
type classStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *classStream) Context() context.Context { return s.ctx }

// errThrottled is the error of a call the Throttle rejected; like
// errLimited, it allocates nothing.
var errThrottled error = throttledError{}

var throttledStatus = status.New(codes.ResourceExhausted, throttledError{}.Error())

// throttledError carries codes.ResourceExhausted for gRPC and
// adaptive.ErrThrottled for errors.Is.
type throttledError struct{}

func (throttledError) Error() string {
	return "adaptivegrpc: call throttled: the server has been refusing calls"
}
func (throttledError) GRPCStatus() *status.Status { return throttledStatus }
func (throttledError) Unwrap() error              { return adaptive.ErrThrottled }

// pushbackError is the error of a call refused during a server's pushback:
// codes.ResourceExhausted for gRPC, the *adaptive.RetryAfterError for
// errors.As.
type pushbackError struct{ ra *adaptive.RetryAfterError }

func (e pushbackError) Error() string {
	return fmt.Sprintf("adaptivegrpc: the server asked for no call for another %v", e.ra.RetryAfter)
}
func (e pushbackError) GRPCStatus() *status.Status {
	return status.New(codes.ResourceExhausted, e.Error())
}
func (e pushbackError) Unwrap() error { return e.ra }

// shedError is the error of an RPC that a gated Limiter's queue discipline
// shed while it waited (WithWait): codes.ResourceExhausted for gRPC, and
// the gate's error (overload.ErrShed and its kind) for errors.Is.
type shedError struct{ err error }

func (e shedError) Error() string { return "adaptivegrpc: " + e.err.Error() }
func (e shedError) GRPCStatus() *status.Status {
	return status.New(codes.ResourceExhausted, e.Error())
}
func (e shedError) Unwrap() error { return e.err }

// shedByLimit reports whether the server interceptors' admit refused an RPC
// for the limit (at once, or by the gate's queue discipline), which the
// retry pushback answers.
func shedByLimit(err error) bool {
	_, shed := err.(shedError)
	return err == errLimited || shed
}
