package adaptivegrpc_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptivegrpc"
)

// fixedLimiter returns a limiter whose limit stays at n whatever the
// outcomes, so that a test knows how many RPCs it admits.
func fixedLimiter(t testing.TB, n int64) *adaptive.Limiter {
	t.Helper()
	lim, err := adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(n, n, n))
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	return lim
}

// boundedLimiter is fixedLimiter with a latency bound: an RPC that ends
// Inconclusive counts as Dropped if it lasted longer than bound, and as
// Ignored otherwise.
func boundedLimiter(t testing.TB, n int64, bound time.Duration) *adaptive.Limiter {
	t.Helper()
	lim, err := adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(n, n, n), adaptive.WithLatencyBound(bound))
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	return lim
}

// counts is what a test reads of a limiter's Stats.
type counts struct {
	Succeeded, Dropped, Ignored, Rejected uint64
	InFlight                              int64
	Waiters                               int
}

func countsOf(lim *adaptive.Limiter) counts {
	st := lim.Stats()
	return counts{Succeeded: st.Succeeded, Dropped: st.Dropped, Ignored: st.Ignored, Rejected: st.Rejected, InFlight: st.InFlight, Waiters: st.Waiters}
}

// service is a TestService whose methods a test sets; the defaults
// answer with the status a request asks for.
type service struct {
	testgrpc.UnimplementedTestServiceServer
	unary  func(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error)
	output func(req *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error
}

func (s *service) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if s.unary != nil {
		return s.unary(ctx, req)
	}
	return &testgrpc.SimpleResponse{}, echoStatus(req.GetResponseStatus())
}

// StreamingOutputCall sends one response per parameter, then ends with the
// status the request asks for.
func (s *service) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
	if s.output != nil {
		return s.output(req, ss)
	}
	for range req.GetResponseParameters() {
		if err := ss.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
	return echoStatus(req.GetResponseStatus())
}

// StreamingInputCall reads the client's messages to the end and answers
// with their number.
func (s *service) StreamingInputCall(ss testgrpc.TestService_StreamingInputCallServer) error {
	n := int32(0)
	for {
		_, err := ss.Recv()
		if err == io.EOF {
			return ss.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: n})
		}
		if err != nil {
			return err
		}
		n++
	}
}

// FullDuplexCall answers each message with one response, or ends with the
// status a message asks for.
func (s *service) FullDuplexCall(ss testgrpc.TestService_FullDuplexCallServer) error {
	for {
		req, err := ss.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := echoStatus(req.GetResponseStatus()); err != nil {
			return err
		}
		if err := ss.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
}

func echoStatus(s *testgrpc.EchoStatus) error {
	if s == nil {
		return nil
	}
	return status.Error(codes.Code(s.GetCode()), s.GetMessage())
}

func asking(c codes.Code) *testgrpc.EchoStatus {
	return &testgrpc.EchoStatus{Code: int32(c), Message: "asked for " + c.String()}
}

// serve starts svc on a loopback listener with the given server options
// and returns a client of it dialled with the given dial options. Both stop
// when the test ends.
func serve(t testing.TB, svc testgrpc.TestServiceServer, srvOpts []grpc.ServerOption, dialOpts ...grpc.DialOption) testgrpc.TestServiceClient {
	t.Helper()
	return testgrpc.NewTestServiceClient(dial(t, svc, srvOpts, dialOpts...))
}

// dial is serve, returning the client's connection.
func dial(t testing.TB, svc testgrpc.TestServiceServer, srvOpts []grpc.ServerOption, dialOpts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(srvOpts...)
	testgrpc.RegisterTestServiceServer(srv, svc)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), append(dialOpts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		<-served
	})
	return conn
}

// limitedServer serves svc with both of this package's server interceptors
// on lim, inside an outer interceptor that reports each RPC's return on
// the channel it returns: once an RPC has been reported, its permit has
// ended.
func limitedServer(t *testing.T, lim *adaptive.Limiter, svc testgrpc.TestServiceServer, opts ...adaptivegrpc.Option) (testgrpc.TestServiceClient, <-chan error) {
	t.Helper()
	returned := make(chan error, 100)
	outerUnary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		returned <- err
		return resp, err
	}
	outerStream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		err := handler(srv, ss)
		returned <- err
		return err
	}
	client := serve(t, svc, []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(outerUnary, adaptivegrpc.UnaryServerInterceptor(lim, opts...)),
		grpc.ChainStreamInterceptor(outerStream, adaptivegrpc.StreamServerInterceptor(lim, opts...)),
	})
	return client, returned
}

// limitedClient serves svc without a limit and returns a client with both
// of this package's client interceptors on lim.
func limitedClient(t *testing.T, lim *adaptive.Limiter, svc testgrpc.TestServiceServer, opts ...adaptivegrpc.Option) testgrpc.TestServiceClient {
	t.Helper()
	return serve(t, svc, nil,
		grpc.WithChainUnaryInterceptor(adaptivegrpc.UnaryClientInterceptor(lim, opts...)),
		grpc.WithChainStreamInterceptor(adaptivegrpc.StreamClientInterceptor(lim, opts...)))
}

// serveB is serve for a benchmark, with the default service.
func serveB(b *testing.B, srvOpts []grpc.ServerOption, dialOpts []grpc.DialOption) testgrpc.TestServiceClient {
	return serve(b, &service{}, srvOpts, dialOpts...)
}
