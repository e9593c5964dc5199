package adaptivegrpc

import (
	"context"

	"google.golang.org/grpc"

	"github.com/atomicsem/atomicsem/adaptive"
)

// UnaryServerInterceptor returns an interceptor that admits each unary RPC
// through lim before its handler runs, and ends the permit with the
// Classifier's verdict on the handler's error when the handler returns.
// When lim has no free slot, the RPC fails at once with
// codes.ResourceExhausted and the retry hint of WithRetryPushback (a
// second by default), and the handler does not run; WithWait makes it wait
// instead. It is a run-time error to pass a nil lim or Option.
func UnaryServerInterceptor(lim *adaptive.Limiter, opts ...Option) grpc.UnaryServerInterceptor {
	c := newConfig(lim, opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var p adaptive.Permit
		if err := c.admit(ctx, &p); err != nil {
			if err == errLimited {
				_ = grpc.SetTrailer(ctx, c.pushback) // fails only outside a gRPC server
			}
			return nil, err
		}
		// Ignored stands until the classifier's verdict replaces it, so
		// that a panic in the handler or the classifier frees the slot too.
		o := adaptive.Ignored
		defer func() { p.End(o) }()
		resp, err := handler(ctx, req)
		o = c.classify(ctx, info.FullMethod, err)
		return resp, err
	}
}

// StreamServerInterceptor returns an interceptor that admits each
// streaming RPC through lim before its handler runs, holds the permit for
// the stream's life, and ends it with the Classifier's verdict on the
// handler's error when the handler returns. When lim has no free slot, the
// stream fails at once with codes.ResourceExhausted and the retry hint of
// WithRetryPushback, and the handler does not run; WithWait makes it wait
// instead. It is a run-time error to pass a nil lim or Option.
func StreamServerInterceptor(lim *adaptive.Limiter, opts ...Option) grpc.StreamServerInterceptor {
	c := newConfig(lim, opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		var p adaptive.Permit
		if err := c.admit(ctx, &p); err != nil {
			if err == errLimited {
				ss.SetTrailer(c.pushback)
			}
			return err
		}
		// Ignored stands until the classifier's verdict replaces it, so
		// that a panic in the handler or the classifier frees the slot too.
		o := adaptive.Ignored
		defer func() { p.End(o) }()
		err := handler(srv, ss)
		o = c.classify(ctx, info.FullMethod, err)
		return err
	}
}
