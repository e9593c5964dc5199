package adaptivegrpc_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptivegrpc"
)

func TestUnaryClientClassifiesTheAnswer(t *testing.T) {
	tests := []struct {
		name string
		code codes.Code
		want counts
	}{
		{"OK", codes.OK, counts{Succeeded: 1}},
		{"server overloaded", codes.ResourceExhausted, counts{Dropped: 1}},
		{"server unavailable", codes.Unavailable, counts{Dropped: 1}},
		{"bad request", codes.InvalidArgument, counts{Succeeded: 1}},
		{"server error", codes.Internal, counts{Ignored: 1}}, // Inconclusive, within the latency bound
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := boundedLimiter(t, 2, time.Hour)
			client := limitedClient(t, lim, &service{})
			_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{ResponseStatus: asking(tt.code)})
			require.Equal(t, tt.code, status.Code(err))
			require.Equal(t, tt.want, countsOf(lim))
		})
	}
}

// TestUnaryClientDeadlineIsDropped: a call whose deadline passes ends
// Inconclusive, which past the latency bound (5 ms) counts as Dropped.
func TestUnaryClientDeadlineIsDropped(t *testing.T) {
	lim := boundedLimiter(t, 2, 5*time.Millisecond)
	client := limitedClient(t, lim, &service{unary: blocking(make(chan struct{}, 1), nil)})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	require.Equal(t, codes.DeadlineExceeded, status.Code(err))
	require.Equal(t, counts{Dropped: 1}, countsOf(lim))
}

func TestUnaryClientCancelIsIgnored(t *testing.T) {
	lim := fixedLimiter(t, 2)
	started := make(chan struct{}, 1)
	client := limitedClient(t, lim, &service{unary: blocking(started, nil)})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	require.Equal(t, codes.Canceled, status.Code(err))
	require.Equal(t, counts{Ignored: 1}, countsOf(lim))
}

func TestUnaryClientShedsWithoutReachingTheServer(t *testing.T) {
	lim := fixedLimiter(t, 1)
	var calls atomic.Int64
	started, release := make(chan struct{}, 2), make(chan struct{})
	hold := blocking(started, release)
	client := limitedClient(t, lim, &service{unary: func(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		calls.Add(1)
		return hold(ctx, req)
	}})
	first := make(chan error, 1)
	go func() {
		_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		first <- err
	}()
	<-started
	_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.Equal(t, codes.ResourceExhausted, status.Code(err))
	require.ErrorIs(t, err, adaptive.ErrLimited)
	require.EqualValues(t, 1, calls.Load(), "the shed call never reached the server")

	// Streams are shed the same way, before they are opened.
	_, err = client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
	require.Equal(t, codes.ResourceExhausted, status.Code(err))
	require.ErrorIs(t, err, adaptive.ErrLimited)
	require.Equal(t, counts{InFlight: 1, Rejected: 2}, countsOf(lim))

	close(release)
	require.NoError(t, <-first)
	require.Equal(t, counts{Succeeded: 1, Rejected: 2}, countsOf(lim))
}

func TestUnaryClientWithWaitAdmitsInTurn(t *testing.T) {
	lim := fixedLimiter(t, 1)
	started, release := make(chan struct{}, 2), make(chan struct{})
	client := limitedClient(t, lim, &service{unary: blocking(started, release)}, adaptivegrpc.WithWait())
	errs := make(chan error, 2)
	call := func() {
		_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		errs <- err
	}
	go call()
	<-started
	go call()
	require.Eventually(t, func() bool { return countsOf(lim).Waiters == 1 }, 10*time.Second, time.Millisecond)
	require.Len(t, started, 0)

	// A call whose deadline passes while it waits fails with the
	// deadline's code and counts nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	require.Equal(t, codes.DeadlineExceeded, status.Code(err))

	close(release)
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	require.Equal(t, counts{Succeeded: 2}, countsOf(lim))
}

func TestStreamClientEndsThePermitWithTheStream(t *testing.T) {
	t.Run("server stream read to the end", func(t *testing.T) {
		lim := fixedLimiter(t, 2)
		client := limitedClient(t, lim, &service{})
		stream, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{
			ResponseParameters: make([]*testgrpc.ResponseParameters, 3)})
		require.NoError(t, err)
		for range 3 {
			_, err := stream.Recv()
			require.NoError(t, err)
			require.Equal(t, counts{InFlight: 1}, countsOf(lim), "the permit is held while the stream is open")
		}
		_, err = stream.Recv()
		require.Equal(t, io.EOF, err)
		require.Equal(t, counts{Succeeded: 1}, countsOf(lim))
		_, err = stream.Recv() // reading past the end ends nothing twice
		require.Equal(t, io.EOF, err)
		require.Equal(t, counts{Succeeded: 1}, countsOf(lim))
	})
	t.Run("server stream ends Unavailable", func(t *testing.T) {
		lim := fixedLimiter(t, 2)
		client := limitedClient(t, lim, &service{})
		stream, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{
			ResponseParameters: make([]*testgrpc.ResponseParameters, 1), ResponseStatus: asking(codes.Unavailable)})
		require.NoError(t, err)
		_, err = stream.Recv()
		require.NoError(t, err)
		_, err = stream.Recv()
		require.Equal(t, codes.Unavailable, status.Code(err))
		require.Equal(t, counts{Dropped: 1}, countsOf(lim))
	})
	t.Run("client stream ends with its one response", func(t *testing.T) {
		lim := fixedLimiter(t, 2)
		client := limitedClient(t, lim, &service{})
		stream, err := client.StreamingInputCall(context.Background())
		require.NoError(t, err)
		require.NoError(t, stream.Send(&testgrpc.StreamingInputCallRequest{}))
		resp, err := stream.CloseAndRecv()
		require.NoError(t, err)
		require.EqualValues(t, 1, resp.GetAggregatedPayloadSize())
		require.Equal(t, counts{Succeeded: 1}, countsOf(lim))
	})
	t.Run("bidirectional stream", func(t *testing.T) {
		lim := fixedLimiter(t, 2)
		client := limitedClient(t, lim, &service{})
		stream, err := client.FullDuplexCall(context.Background())
		require.NoError(t, err)
		for range 2 {
			require.NoError(t, stream.Send(&testgrpc.StreamingOutputCallRequest{}))
			_, err = stream.Recv()
			require.NoError(t, err)
		}
		_, err = stream.Header()
		require.NoError(t, err)
		require.NoError(t, stream.CloseSend())
		_, err = stream.Recv()
		require.Equal(t, io.EOF, err)
		require.Equal(t, counts{Succeeded: 1}, countsOf(lim))
	})
	t.Run("send fails after the server ended the stream", func(t *testing.T) {
		lim := fixedLimiter(t, 2)
		client := limitedClient(t, lim, &service{})
		stream, err := client.FullDuplexCall(context.Background())
		require.NoError(t, err)
		require.NoError(t, stream.Send(&testgrpc.StreamingOutputCallRequest{ResponseStatus: asking(codes.ResourceExhausted)}))
		// Send reports io.EOF once the stream is over; RecvMsg has the status.
		for stream.Send(&testgrpc.StreamingOutputCallRequest{}) == nil {
			time.Sleep(time.Millisecond)
		}
		require.Equal(t, counts{InFlight: 1}, countsOf(lim))
		_, err = stream.Recv()
		require.Equal(t, codes.ResourceExhausted, status.Code(err))
		require.Equal(t, counts{Dropped: 1}, countsOf(lim))
	})
}

// TestStreamClientContextEndsAnAbandonedStream: a caller that cancels a
// stream and never reads it again must not lose the slot.
func TestStreamClientContextEndsAnAbandonedStream(t *testing.T) {
	tests := []struct {
		name string
		end  func(cancel context.CancelFunc)
		ctx  func() (context.Context, context.CancelFunc)
		want counts
	}{
		{"cancelled", func(cancel context.CancelFunc) { cancel() },
			func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			counts{Ignored: 1}},
		{"deadline", func(context.CancelFunc) {},
			func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 20*time.Millisecond)
			},
			counts{Dropped: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The deadline's stream ends past the latency bound, the
			// cancelled one (a client that leaves at once) within it.
			bound := 5 * time.Millisecond
			if tt.name == "cancelled" {
				bound = time.Hour
			}
			lim := boundedLimiter(t, 1, bound)
			client := limitedClient(t, lim, &service{})
			ctx, cancel := tt.ctx()
			defer cancel()
			// Opened and never read: under load the deadline may pass before
			// the stream opens, which ends the permit Dropped all the same.
			_, err := client.FullDuplexCall(ctx)
			require.True(t, err == nil || status.Code(err) == codes.DeadlineExceeded, "%v", err)
			tt.end(cancel)
			require.Eventually(t, func() bool { return countsOf(lim) == tt.want }, 10*time.Second, time.Millisecond)
			// The slot is free again.
			_, err = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
			require.NoError(t, err)
		})
	}
}

func TestStreamClientOpenFailsOnADoneContext(t *testing.T) {
	lim := fixedLimiter(t, 1)
	client := limitedClient(t, lim, &service{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stream, err := client.FullDuplexCall(ctx)
	if err == nil {
		_, err = stream.Recv()
	}
	require.Equal(t, codes.Canceled, status.Code(err))
	require.Eventually(t, func() bool { return countsOf(lim) == counts{Ignored: 1} }, 10*time.Second, time.Millisecond)
}

func TestStreamClientWithClassifier(t *testing.T) {
	lim := fixedLimiter(t, 1)
	var method atomic.Value
	client := limitedClient(t, lim, &service{}, adaptivegrpc.WithClassifier(func(_ context.Context, m string, err error) adaptive.Outcome {
		method.Store(m)
		return adaptive.Ignored // a long-lived stream's duration says nothing about load
	}))
	stream, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
	require.NoError(t, err)
	_, err = stream.Recv()
	require.Equal(t, io.EOF, err)
	require.Equal(t, counts{Ignored: 1}, countsOf(lim))
	require.Equal(t, "/grpc.testing.TestService/StreamingOutputCall", method.Load())
}

func TestNilArgumentsPanic(t *testing.T) {
	lim := fixedLimiter(t, 1)
	require.PanicsWithValue(t, "adaptivegrpc: nil Limiter", func() { adaptivegrpc.UnaryServerInterceptor(nil) })
	require.PanicsWithValue(t, "adaptivegrpc: nil Limiter", func() { adaptivegrpc.StreamClientInterceptor(nil) })
	require.PanicsWithValue(t, "adaptivegrpc: nil Classifier", func() { adaptivegrpc.UnaryClientInterceptor(lim, adaptivegrpc.WithClassifier(nil)) })
}

// TestStreamClientPanicFreesTheSlot: a streamer or a classifier that
// panics while a stream opens ends the permit Ignored.
func TestStreamClientPanicFreesTheSlot(t *testing.T) {
	desc := &grpc.StreamDesc{ServerStreams: true}
	failing := func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
		return nil, status.Error(codes.Unavailable, "down")
	}
	panicking := func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
		panic("streamer bug")
	}
	tests := []struct {
		name     string
		streamer grpc.Streamer
		opts     []adaptivegrpc.Option
		want     counts
	}{
		{"streamer fails", failing, nil, counts{Dropped: 1}},
		{"streamer panics", panicking, nil, counts{Ignored: 1}},
		{"classifier panics", failing, []adaptivegrpc.Option{adaptivegrpc.WithClassifier(func(context.Context, string, error) adaptive.Outcome {
			panic("classifier bug")
		})}, counts{Ignored: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := fixedLimiter(t, 1)
			intercept := adaptivegrpc.StreamClientInterceptor(lim, tt.opts...)
			func() {
				defer func() { _ = recover() }()
				_, err := intercept(context.Background(), desc, nil, "/s/S", tt.streamer)
				require.Error(t, err)
			}()
			require.Equal(t, tt.want, countsOf(lim))
		})
	}
}

// TestStreamClientConnCloseEndsTheStreams opens a stream of each kind and
// reads none of them, then closes the ClientConn, which grpc-go documents
// as one of the ways a stream ends: every permit ends (Ignored: the
// streams end Canceled, as the caller's own doing), and the slots are free
// for the next connection.
func TestStreamClientConnCloseEndsTheStreams(t *testing.T) {
	lim := fixedLimiter(t, 3)
	svc := &service{output: func(_ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
		<-ss.Context().Done()
		return ss.Context().Err()
	}}
	interceptors := []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(adaptivegrpc.UnaryClientInterceptor(lim)),
		grpc.WithChainStreamInterceptor(adaptivegrpc.StreamClientInterceptor(lim)),
	}
	conn := dial(t, svc, nil, interceptors...)
	client := testgrpc.NewTestServiceClient(conn)
	ctx := context.Background()
	_, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
	require.NoError(t, err)
	_, err = client.StreamingInputCall(ctx)
	require.NoError(t, err)
	_, err = client.FullDuplexCall(ctx)
	require.NoError(t, err)
	require.Equal(t, counts{InFlight: 3}, countsOf(lim))

	require.NoError(t, conn.Close())
	require.Eventually(t, func() bool { return countsOf(lim) == counts{Ignored: 3} }, 10*time.Second, time.Millisecond,
		"the streams' permits outlive their ClientConn: %+v", countsOf(lim))

	again := testgrpc.NewTestServiceClient(dial(t, &service{}, nil, interceptors...))
	for range 3 {
		_, err := again.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		require.NoError(t, err)
	}
	require.Equal(t, counts{Ignored: 3, Succeeded: 3}, countsOf(lim))
}

func TestNilOptionPanics(t *testing.T) {
	lim := fixedLimiter(t, 1)
	for name, f := range map[string]func(){
		"UnaryServerInterceptor":  func() { adaptivegrpc.UnaryServerInterceptor(lim, adaptivegrpc.WithWait(), nil) },
		"StreamServerInterceptor": func() { adaptivegrpc.StreamServerInterceptor(lim, nil) },
		"UnaryClientInterceptor":  func() { adaptivegrpc.UnaryClientInterceptor(lim, nil) },
		"StreamClientInterceptor": func() { adaptivegrpc.StreamClientInterceptor(lim, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			require.PanicsWithValue(t, "adaptivegrpc: nil Option", f)
		})
	}
}

// TestStreamClientContextEndsAStreamWhoseOptionsWereDropped puts an
// interceptor inside this package's that opens the stream without the call
// options, so that grpc-go never tells this package's interceptor that the
// stream finished: a caller that cancels the stream and never reads it
// again still gets its slot back, from the context.
func TestStreamClientContextEndsAStreamWhoseOptionsWereDropped(t *testing.T) {
	lim := fixedLimiter(t, 1)
	dropOptions := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, _ ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(ctx, desc, cc, method)
	}
	client := serve(t, &service{}, nil,
		grpc.WithChainStreamInterceptor(adaptivegrpc.StreamClientInterceptor(lim), dropOptions))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := client.FullDuplexCall(ctx)
	require.NoError(t, err)
	require.Equal(t, counts{InFlight: 1}, countsOf(lim))
	cancel()
	require.Eventually(t, func() bool { return countsOf(lim) == counts{Ignored: 1} }, 10*time.Second, time.Millisecond)
}
