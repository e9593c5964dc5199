package adaptivegrpc_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptivegrpc"
)

// fakeServerStream is the least a stream handler needs: a context.
type fakeServerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *fakeServerStream) Context() context.Context { return s.ctx }

// TestInterceptorsDoNotAllocate calls the interceptors directly, with
// handlers that allocate nothing, so that any allocation counted is the
// interceptor's: admitting, classifying (a status error included) and
// ending cost none, on the server, on a unary client, and when shedding.
// A client stream is the exception, measured in the benchmarks: it wraps
// the stream grpc returns, and registers a callback on its context.
func TestInterceptorsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race build gives every token a cell of its own to catch copies, an allocation")
	}
	if testing.Short() {
		t.Skip("allocation counts need the full run")
	}
	ctx := context.Background()
	unaryInfo := &grpc.UnaryServerInfo{FullMethod: "/s/M"}
	streamInfo := &grpc.StreamServerInfo{FullMethod: "/s/S"}
	unavailable := status.Error(codes.Unavailable, "down")
	var resp struct{}
	tests := []struct {
		name string
		call func(lim *adaptive.Limiter) func()
	}{
		{"unary server, succeeded", func(lim *adaptive.Limiter) func() {
			intercept := adaptivegrpc.UnaryServerInterceptor(lim)
			handler := func(context.Context, any) (any, error) { return &resp, nil }
			return func() { _, _ = intercept(ctx, nil, unaryInfo, handler) }
		}},
		{"unary server, dropped", func(lim *adaptive.Limiter) func() {
			intercept := adaptivegrpc.UnaryServerInterceptor(lim)
			handler := func(context.Context, any) (any, error) { return nil, unavailable }
			return func() { _, _ = intercept(ctx, nil, unaryInfo, handler) }
		}},
		{"unary server, waiting", func(lim *adaptive.Limiter) func() {
			intercept := adaptivegrpc.UnaryServerInterceptor(lim, adaptivegrpc.WithWait())
			handler := func(context.Context, any) (any, error) { return &resp, nil }
			return func() { _, _ = intercept(ctx, nil, unaryInfo, handler) }
		}},
		{"stream server", func(lim *adaptive.Limiter) func() {
			intercept := adaptivegrpc.StreamServerInterceptor(lim)
			var ss grpc.ServerStream = &fakeServerStream{ctx: ctx}
			handler := func(any, grpc.ServerStream) error { return nil }
			return func() { _ = intercept(nil, ss, streamInfo, handler) }
		}},
		{"unary client", func(lim *adaptive.Limiter) func() {
			intercept := adaptivegrpc.UnaryClientInterceptor(lim)
			invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
			return func() { _ = intercept(ctx, "/s/M", nil, nil, nil, invoker) }
		}},
		{"unary client, shed", func(lim *adaptive.Limiter) func() {
			var p adaptive.Permit
			require.True(t, lim.TryAcquire(&p)) // the limit is 1: every call is shed
			intercept := adaptivegrpc.UnaryClientInterceptor(lim)
			invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
			return func() { _ = intercept(ctx, "/s/M", nil, nil, nil, invoker) }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call := tt.call(fixedLimiter(t, 1))
			require.Zero(t, testing.AllocsPerRun(1000, call))
		})
	}
}
