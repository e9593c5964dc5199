package adaptivegrpc_test

import (
	"context"
	"io"
	"testing"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/atomicsem/atomicsem/adaptivegrpc"
)

// BenchmarkRPC makes RPCs over loopback with this package's interceptors
// on the server or on the client, beside two baselines: no interceptor,
// and interceptors that only call on (grpc allocates the server's
// interceptor info and handler closure once there is any interceptor), so
// that benchstat -col /impl shows what the limiter adds to an RPC's time
// and allocations.
func BenchmarkRPC(b *testing.B) {
	type setup struct {
		name     string
		srvOpts  func(b *testing.B) []grpc.ServerOption
		dialOpts func(b *testing.B) []grpc.DialOption
	}
	none := func(*testing.B) []grpc.ServerOption { return nil }
	noDial := func(*testing.B) []grpc.DialOption { return nil }
	setups := []setup{
		{"impl=none", none, noDial},
		{"impl=noop-server", func(*testing.B) []grpc.ServerOption {
			return []grpc.ServerOption{grpc.UnaryInterceptor(noopUnaryServer), grpc.StreamInterceptor(noopStreamServer)}
		}, noDial},
		{"impl=noop-client", none, func(*testing.B) []grpc.DialOption {
			return []grpc.DialOption{grpc.WithUnaryInterceptor(noopUnaryClient), grpc.WithStreamInterceptor(noopStreamClient)}
		}},
		{"impl=server", func(b *testing.B) []grpc.ServerOption {
			lim := fixedLimiter(b, 1000)
			return []grpc.ServerOption{
				grpc.UnaryInterceptor(adaptivegrpc.UnaryServerInterceptor(lim)),
				grpc.StreamInterceptor(adaptivegrpc.StreamServerInterceptor(lim)),
			}
		}, noDial},
		{"impl=client", none, func(b *testing.B) []grpc.DialOption {
			lim := fixedLimiter(b, 1000)
			return []grpc.DialOption{
				grpc.WithUnaryInterceptor(adaptivegrpc.UnaryClientInterceptor(lim)),
				grpc.WithStreamInterceptor(adaptivegrpc.StreamClientInterceptor(lim)),
			}
		}},
	}
	for _, kind := range []string{"unary", "stream"} {
		for _, s := range setups {
			b.Run("rpc="+kind+"/"+s.name, func(b *testing.B) {
				client := serveB(b, s.srvOpts(b), s.dialOpts(b))
				ctx := context.Background()
				req := &testgrpc.SimpleRequest{}
				sreq := &testgrpc.StreamingOutputCallRequest{}
				b.ReportAllocs()
				for b.Loop() {
					if kind == "unary" {
						if _, err := client.UnaryCall(ctx, req); err != nil {
							b.Fatal(err)
						}
						continue
					}
					stream, err := client.StreamingOutputCall(ctx, sreq)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := stream.Recv(); err != io.EOF {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func noopUnaryServer(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return handler(ctx, req)
}

func noopStreamServer(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, ss)
}

func noopUnaryClient(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(ctx, method, req, reply, cc, opts...)
}

func noopStreamClient(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(ctx, desc, cc, method, opts...)
}
