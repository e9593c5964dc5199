package adaptivegrpc_test

import (
	"context"
	"fmt"
	"io"
	"sync"
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

// TestUnaryServerClassifiesEveryCode sends one RPC per gRPC code over the
// wire and checks the outcome each one's permit ended with; the Inconclusive
// ones end within the latency bound, and count as Ignored.
func TestUnaryServerClassifiesEveryCode(t *testing.T) {
	lim := boundedLimiter(t, 4, time.Hour)
	client, returned := limitedServer(t, lim, &service{})
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		want := counts{Succeeded: 1}
		switch c {
		case codes.ResourceExhausted, codes.Unavailable, codes.DeadlineExceeded:
			want = counts{Dropped: 1}
		case codes.Unknown, codes.Internal, codes.DataLoss, codes.Unimplemented, codes.Canceled:
			want = counts{Ignored: 1}
		}
		before := countsOf(lim)
		_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{ResponseStatus: asking(c)})
		require.Equal(t, c, status.Code(err), "the code reaches the client unchanged")
		<-returned
		after := countsOf(lim)
		got := counts{Succeeded: after.Succeeded - before.Succeeded, Dropped: after.Dropped - before.Dropped, Ignored: after.Ignored - before.Ignored}
		require.Equal(t, want, got, "code %v", c)
		require.Zero(t, after.InFlight)
	}
}

// blocking returns a unary method that reports each call on started and
// then waits for release (answering OK) or for its context (answering the
// context's error, wrapped as a handler would).
func blocking(started chan<- struct{}, release <-chan struct{}) func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		started <- struct{}{}
		select {
		case <-release:
			return &testgrpc.SimpleResponse{}, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("query: %w", ctx.Err())
		}
	}
}

func TestUnaryServerShedsWithResourceExhausted(t *testing.T) {
	lim := fixedLimiter(t, 1)
	started, release := make(chan struct{}, 2), make(chan struct{})
	client, returned := limitedServer(t, lim, &service{unary: blocking(started, release)})

	first := make(chan error, 1)
	go func() {
		_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		first <- err
	}()
	<-started
	_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.Equal(t, codes.ResourceExhausted, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), "adaptivegrpc: concurrency limit reached")
	require.Len(t, started, 0, "the shed RPC's handler did not run")
	require.Equal(t, counts{Rejected: 1, InFlight: 1}, countsOf(lim))

	close(release)
	require.NoError(t, <-first)
	<-returned
	<-returned
	require.Equal(t, counts{Succeeded: 1, Rejected: 1}, countsOf(lim))
}

func TestUnaryServerWithWaitAdmitsInTurn(t *testing.T) {
	lim := fixedLimiter(t, 1)
	started, release := make(chan struct{}, 2), make(chan struct{})
	client, returned := limitedServer(t, lim, &service{unary: blocking(started, release)}, adaptivegrpc.WithWait())

	errs := make(chan error, 2)
	call := func() {
		_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		errs <- err
	}
	go call()
	<-started
	go call()
	require.Eventually(t, func() bool { return countsOf(lim).Waiters == 1 }, 10*time.Second, time.Millisecond)
	require.Len(t, started, 0, "the waiting RPC's handler has not run")

	close(release)
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	<-returned
	<-returned
	require.Equal(t, counts{Succeeded: 2}, countsOf(lim))
}

func TestUnaryServerWithWaitEndsWithTheRPCDeadline(t *testing.T) {
	lim := fixedLimiter(t, 1)
	started, release := make(chan struct{}, 2), make(chan struct{})
	client, returned := limitedServer(t, lim, &service{unary: blocking(started, release)}, adaptivegrpc.WithWait())

	first := make(chan error, 1)
	go func() {
		_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		first <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	require.Equal(t, codes.DeadlineExceeded, status.Code(err))
	// The server sees the client's deadline as its own, or as a cancellation
	// just before it.
	require.Contains(t, []codes.Code{codes.DeadlineExceeded, codes.Canceled}, status.Code(<-returned), "the server's wait ended with the RPC")
	require.Equal(t, counts{InFlight: 1}, countsOf(lim), "a wait that ends counts no outcome")

	close(release)
	require.NoError(t, <-first)
	<-returned
}

func TestUnaryServerWithWaitFailsUnavailableOnClose(t *testing.T) {
	lim := fixedLimiter(t, 1)
	started, release := make(chan struct{}, 2), make(chan struct{})
	client, returned := limitedServer(t, lim, &service{unary: blocking(started, release)}, adaptivegrpc.WithWait())

	errs := make(chan error, 2)
	call := func() {
		_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		errs <- err
	}
	go call()
	<-started
	go call()
	require.Eventually(t, func() bool { return countsOf(lim).Waiters == 1 }, 10*time.Second, time.Millisecond)
	lim.Close()
	err := <-errs
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), "adaptivegrpc: ")
	<-returned
	close(release)
	require.NoError(t, <-errs)
	<-returned
}

// TestServerDeadlineIsDropped: an RPC whose deadline passes on the server
// ends Inconclusive, which past the latency bound (5 ms) counts as
// Dropped, whatever the handler wraps the context's error in. Over the
// wire the server usually sees its client's deadline as a cancellation
// shortly before its own copy of the deadline; this handler, like one busy
// with its work, returns only once its own deadline has passed too.
func TestServerDeadlineIsDropped(t *testing.T) {
	lim := boundedLimiter(t, 2, 5*time.Millisecond)
	client, returned := limitedServer(t, lim, &service{unary: func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		<-ctx.Done()
		if d, ok := ctx.Deadline(); ok {
			time.Sleep(time.Until(d))
		}
		return nil, fmt.Errorf("query: %w", ctx.Err())
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	require.Equal(t, codes.DeadlineExceeded, status.Code(err))
	require.Error(t, <-returned)
	require.Equal(t, counts{Dropped: 1}, countsOf(lim))
}

// TestClientCancelIsIgnored: a client that goes away says nothing about
// the server's load.
func TestClientCancelIsIgnored(t *testing.T) {
	lim := fixedLimiter(t, 2)
	started := make(chan struct{}, 1)
	client, returned := limitedServer(t, lim, &service{unary: blocking(started, nil)})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	require.Equal(t, codes.Canceled, status.Code(err))
	require.ErrorIs(t, <-returned, context.Canceled)
	require.Equal(t, counts{Ignored: 1}, countsOf(lim))
}

func TestUnaryServerWithClassifier(t *testing.T) {
	lim := fixedLimiter(t, 2)
	var mu sync.Mutex
	var seen []string
	classify := func(ctx context.Context, method string, err error) adaptive.Outcome {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s %v", method, status.Code(err)))
		if status.Code(err) == codes.NotFound {
			return adaptive.Ignored // say, a cache miss answered at once
		}
		return adaptive.Dropped
	}
	client, returned := limitedServer(t, lim, &service{}, adaptivegrpc.WithClassifier(classify))
	_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{ResponseStatus: asking(codes.NotFound)})
	require.Equal(t, codes.NotFound, status.Code(err))
	<-returned
	_, err = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	<-returned
	require.Equal(t, []string{"/grpc.testing.TestService/UnaryCall NotFound", "/grpc.testing.TestService/UnaryCall OK"}, seen)
	require.Equal(t, counts{Dropped: 1, Ignored: 1}, countsOf(lim))
}

// recoverer is an outer interceptor that turns a handler's panic into
// codes.Internal, as recovery middleware does.
func recoverer(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = status.Errorf(codes.Internal, "panic: %v", r)
		}
	}()
	return handler(ctx, req)
}

func TestPanicFreesTheSlot(t *testing.T) {
	tests := []struct {
		name string
		svc  *service
		opts []adaptivegrpc.Option
	}{
		{"handler panics", &service{unary: func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
			panic("handler bug")
		}}, nil},
		{"classifier panics", &service{}, []adaptivegrpc.Option{adaptivegrpc.WithClassifier(func(context.Context, string, error) adaptive.Outcome {
			panic("classifier bug")
		})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := fixedLimiter(t, 1)
			client := serve(t, tt.svc, []grpc.ServerOption{
				grpc.ChainUnaryInterceptor(recoverer, adaptivegrpc.UnaryServerInterceptor(lim, tt.opts...)),
			})
			for range 3 { // with a limit of 1, a lost slot would shed the next
				_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
				require.Equal(t, codes.Internal, status.Code(err))
			}
			require.Equal(t, counts{Ignored: 3}, countsOf(lim))
		})
	}
}

// TestStreamServerHoldsThePermitForTheStreamsLife opens a server stream,
// sheds a second while it is open, and ends the first.
func TestStreamServerHoldsThePermitForTheStreamsLife(t *testing.T) {
	lim := fixedLimiter(t, 1)
	release := make(chan struct{})
	svc := &service{output: func(req *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
		if err := ss.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
			return err
		}
		<-release
		return nil
	}}
	client, returned := limitedServer(t, lim, svc)

	first, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
	require.NoError(t, err)
	_, err = first.Recv()
	require.NoError(t, err)
	require.Equal(t, counts{InFlight: 1}, countsOf(lim))

	second, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
	require.NoError(t, err)
	_, err = second.Recv()
	require.Equal(t, codes.ResourceExhausted, status.Code(err))
	require.Equal(t, counts{InFlight: 1, Rejected: 1}, countsOf(lim))

	close(release)
	_, err = first.Recv()
	require.Equal(t, io.EOF, err)
	<-returned
	<-returned
	require.Equal(t, counts{Succeeded: 1, Rejected: 1}, countsOf(lim))
}

func TestStreamServerClassifiesTheEnd(t *testing.T) {
	lim := boundedLimiter(t, 2, time.Hour) // the client that goes away is Inconclusive, within the bound
	client, returned := limitedServer(t, lim, &service{})

	// Bidirectional, ended by an overloaded backend.
	bidi, err := client.FullDuplexCall(context.Background())
	require.NoError(t, err)
	require.NoError(t, bidi.Send(&testgrpc.StreamingOutputCallRequest{}))
	_, err = bidi.Recv()
	require.NoError(t, err)
	require.NoError(t, bidi.Send(&testgrpc.StreamingOutputCallRequest{ResponseStatus: asking(codes.Unavailable)}))
	_, err = bidi.Recv()
	require.Equal(t, codes.Unavailable, status.Code(err))
	<-returned
	require.Equal(t, counts{Dropped: 1}, countsOf(lim))

	// Client streaming, completed.
	up, err := client.StreamingInputCall(context.Background())
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, up.Send(&testgrpc.StreamingInputCallRequest{}))
	}
	resp, err := up.CloseAndRecv()
	require.NoError(t, err)
	require.EqualValues(t, 3, resp.GetAggregatedPayloadSize())
	<-returned
	require.Equal(t, counts{Succeeded: 1, Dropped: 1}, countsOf(lim))

	// Bidirectional, the client goes away mid-stream.
	ctx, cancel := context.WithCancel(context.Background())
	bidi, err = client.FullDuplexCall(ctx)
	require.NoError(t, err)
	require.NoError(t, bidi.Send(&testgrpc.StreamingOutputCallRequest{}))
	_, err = bidi.Recv()
	require.NoError(t, err)
	cancel()
	require.Equal(t, codes.Canceled, status.Code(<-returned))
	require.Equal(t, counts{Succeeded: 1, Dropped: 1, Ignored: 1}, countsOf(lim))
}

// TestSheddingUnderLoad: 32 clients against a limit of 4. First with every
// admitted handler held, so that exactly 4 are admitted and 28 shed; then
// with handlers that return at once, checking that the server never runs
// more than 4 and that every RPC is either served or shed and counted.
func TestSheddingUnderLoad(t *testing.T) {
	const limit, clients, calls = 4, 32, 25
	lim := fixedLimiter(t, limit)
	var running, most atomic.Int64
	gate := make(chan struct{})
	svc := &service{unary: func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-gate
		return &testgrpc.SimpleResponse{}, nil
	}}
	client := serve(t, svc, []grpc.ServerOption{grpc.UnaryInterceptor(adaptivegrpc.UnaryServerInterceptor(lim))})

	// run starts the clients, each making n calls, and returns how many
	// were served and how many shed once wait has returned and they are done.
	run := func(n int, wait func()) (ok, shed int64) {
		var wg sync.WaitGroup
		var okN, shedN atomic.Int64
		for range clients {
			wg.Go(func() {
				for range n {
					_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
					switch status.Code(err) {
					case codes.OK:
						okN.Add(1)
					case codes.ResourceExhausted:
						shedN.Add(1)
					default:
						t.Errorf("unexpected error %v", err)
					}
				}
			})
		}
		wait()
		wg.Wait()
		return okN.Load(), shedN.Load()
	}

	ok, shed := run(1, func() {
		require.Eventually(t, func() bool { return countsOf(lim).Rejected == clients-limit }, 10*time.Second, time.Millisecond)
		require.EqualValues(t, limit, running.Load())
		close(gate) // from here on, handlers return at once
	})
	require.EqualValues(t, limit, ok)
	require.EqualValues(t, clients-limit, shed)
	require.Equal(t, counts{Succeeded: limit, Rejected: clients - limit}, countsOf(lim))

	ok, shed = run(calls, func() {})
	require.EqualValues(t, clients*calls, ok+shed)
	c := countsOf(lim)
	require.EqualValues(t, limit+ok, c.Succeeded)
	require.EqualValues(t, clients-limit+shed, c.Rejected)
	require.Zero(t, c.InFlight)
	require.LessOrEqual(t, most.Load(), int64(limit), "the server never ran more than the limit")
}

// TestOutcomesMoveTheLimit runs AIMD behind the interceptors: answers that
// signal overload, on the server or seen by a client, bring the limit down
// to its minimum, while as many bad requests leave it where it was.
func TestOutcomesMoveTheLimit(t *testing.T) {
	tests := []struct {
		name  string
		side  string
		code  codes.Code
		limit int64
	}{
		{"server: downstream unavailable", "server", codes.Unavailable, 1},
		{"server: bad requests", "server", codes.InvalidArgument, 20},
		{"client: server overloaded", "client", codes.ResourceExhausted, 1},
		{"client: not found", "client", codes.NotFound, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim, err := adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(20, 1, 100))
			require.NoError(t, err)
			defer lim.Close()
			var client testgrpc.TestServiceClient
			if tt.side == "server" {
				client = serve(t, &service{}, []grpc.ServerOption{grpc.UnaryInterceptor(adaptivegrpc.UnaryServerInterceptor(lim))})
			} else {
				client = limitedClient(t, lim, &service{})
			}
			for range 200 {
				_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{ResponseStatus: asking(tt.code)})
				require.Equal(t, tt.code, status.Code(err))
			}
			require.Equal(t, tt.limit, lim.Stats().Limit)
		})
	}
}
