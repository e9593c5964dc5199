package adaptivegrpc_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptivegrpc"
	"github.com/atomicsem/atomicsem/overload"
)

func newThrottle(t *testing.T) *overload.Throttle {
	t.Helper()
	th, err := overload.NewThrottle(2, time.Minute)
	require.NoError(t, err)
	return th
}

// counting serves svc with an interceptor that counts the RPCs that reach
// the server, unary and streaming, and returns a client whose interceptors
// are this package's, on lim with opts.
func counting(t *testing.T, lim *adaptive.Limiter, svc testgrpc.TestServiceServer, opts ...adaptivegrpc.Option) (testgrpc.TestServiceClient, *atomic.Int64) {
	t.Helper()
	hits := new(atomic.Int64)
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		hits.Add(1)
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		hits.Add(1)
		return handler(srv, ss)
	}
	client := serve(t, svc, []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream)},
		grpc.WithChainUnaryInterceptor(adaptivegrpc.UnaryClientInterceptor(lim, opts...)),
		grpc.WithChainStreamInterceptor(adaptivegrpc.StreamClientInterceptor(lim, opts...)))
	return client, hits
}

// call makes a unary call asking for code c, or opens a stream asking for
// it and reads the stream to its end, and returns the error.
func call(ctx context.Context, client testgrpc.TestServiceClient, stream bool, c codes.Code) error {
	if !stream {
		_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseStatus: asking(c)})
		return err
	}
	s, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{ResponseStatus: asking(c)})
	if err != nil {
		return err
	}
	for {
		if _, err := s.Recv(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// TestClientThrottlesAServerThatRefuses makes 300 calls, one after another,
// through the client interceptors with a Throttle, to a loopback server
// that refuses every one with ResourceExhausted: the Throttle refuses all
// but a few locally (about ln 300 ≈ 6 expected), without a permit, with
// ResourceExhausted and errors that match ErrThrottled and ErrLimited.
func TestClientThrottlesAServerThatRefuses(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "unary", true: "stream"}[stream], func(t *testing.T) {
			lim := fixedLimiter(t, 1000)
			th := newThrottle(t)
			client, hits := counting(t, lim, &service{}, adaptivegrpc.WithThrottle(th))
			const n = 300
			refused := 0
			for range n {
				err := call(context.Background(), client, stream, codes.ResourceExhausted)
				require.Equal(t, codes.ResourceExhausted, status.Code(err))
				if errors.Is(err, adaptive.ErrThrottled) {
					require.ErrorIs(t, err, adaptive.ErrLimited)
					refused++
				}
			}
			require.Equal(t, int64(n-refused), hits.Load(), "a refused call reaches no server")
			require.Less(t, hits.Load(), int64(n/3), "the throttle refuses most calls locally")
			require.Equal(t, counts{Dropped: uint64(hits.Load())}, countsOf(lim), "a refused call takes no permit")
			req, acc := th.Counts()
			require.Equal(t, [2]uint64{n, 0}, [2]uint64{req, acc})
		})
	}
}

// TestClientThrottleCountsWhatTheServerAccepted checks what the Throttle
// counts as accepted: every end but ResourceExhausted and Unavailable.
func TestClientThrottleCountsWhatTheServerAccepted(t *testing.T) {
	tests := []struct {
		code     codes.Code
		accepted uint64
	}{
		{codes.OK, 1},
		{codes.NotFound, 1},
		{codes.Internal, 1},
		{codes.DeadlineExceeded, 1},
		{codes.Canceled, 1},
		{codes.ResourceExhausted, 0},
		{codes.Unavailable, 0},
	}
	for _, stream := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(map[bool]string{false: "unary", true: "stream"}[stream]+"/"+tt.code.String(), func(t *testing.T) {
				lim := fixedLimiter(t, 10)
				th := newThrottle(t)
				client, _ := counting(t, lim, &service{}, adaptivegrpc.WithThrottle(th))
				err := call(context.Background(), client, stream, tt.code)
				require.Equal(t, tt.code, status.Code(err))
				req, acc := th.Counts()
				require.Equal(t, [2]uint64{1, tt.accepted}, [2]uint64{req, acc})
				require.Eventually(t, func() bool { return countsOf(lim).InFlight == 0 }, 10*time.Second, time.Millisecond)
			})
		}
	}
}

// TestClientHonoursThePushback has a loopback server's interceptor, on a
// limit of 1 that a first call holds, shed a second call with a pushback:
// with WithMaxRetryPushback the next call fails at once, without reaching
// the server (whose limiter rejects no more calls) or taking a permit, with
// ResourceExhausted and an *adaptive.RetryAfterError of at most the
// pushback and the maximum, and once that is over calls reach the server
// again. Without the option, or with a hint of -1, the next call reaches
// the server.
func TestClientHonoursThePushback(t *testing.T) {
	tests := []struct {
		name     string
		pushback time.Duration // the server's
		max      time.Duration // the client's; 0: no option
		wait     time.Duration // the longest wait expected; 0: none
	}{
		{"honoured", 150 * time.Millisecond, time.Minute, 150 * time.Millisecond},
		{"capped", time.Hour, 150 * time.Millisecond, 150 * time.Millisecond},
		{"not asked", 150 * time.Millisecond, 0, 0},
		{"do not retry", -1, time.Minute, 0},
	}
	for _, stream := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(map[bool]string{false: "unary", true: "stream"}[stream]+"/"+tt.name, func(t *testing.T) {
				server := fixedLimiter(t, 1)
				started, release := make(chan struct{}, 1), make(chan struct{})
				var first atomic.Bool
				block := blocking(started, release)
				svc := &service{unary: func(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					if first.CompareAndSwap(false, true) {
						return block(ctx, req)
					}
					return &testgrpc.SimpleResponse{}, nil
				}}
				var opts []adaptivegrpc.Option
				if tt.max > 0 {
					opts = append(opts, adaptivegrpc.WithMaxRetryPushback(tt.max))
				}
				lim := fixedLimiter(t, 10)
				client := serve(t, svc, []grpc.ServerOption{
					grpc.ChainUnaryInterceptor(adaptivegrpc.UnaryServerInterceptor(server, adaptivegrpc.WithRetryPushback(tt.pushback))),
					grpc.ChainStreamInterceptor(adaptivegrpc.StreamServerInterceptor(server, adaptivegrpc.WithRetryPushback(tt.pushback))),
				},
					grpc.WithChainUnaryInterceptor(adaptivegrpc.UnaryClientInterceptor(lim, opts...)),
					grpc.WithChainStreamInterceptor(adaptivegrpc.StreamClientInterceptor(lim, opts...)))
				held := make(chan error, 1)
				go func() {
					_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
					held <- err
				}()
				<-started

				err := call(context.Background(), client, stream, codes.OK)
				require.Equal(t, codes.ResourceExhausted, status.Code(err), "shed by the server")
				require.Equal(t, uint64(1), countsOf(server).Rejected)

				err = call(context.Background(), client, stream, codes.OK)
				require.Equal(t, codes.ResourceExhausted, status.Code(err))
				var ra *adaptive.RetryAfterError
				if tt.wait == 0 {
					require.False(t, errors.As(err, &ra), "no wait: the call went to the server")
					require.Equal(t, uint64(2), countsOf(server).Rejected)
				} else {
					require.ErrorAs(t, err, &ra)
					require.ErrorIs(t, err, adaptive.ErrLimited)
					require.Greater(t, ra.RetryAfter, time.Duration(0))
					require.LessOrEqual(t, ra.RetryAfter, tt.wait)
					require.Equal(t, uint64(1), countsOf(server).Rejected, "the refused call reached no server")
				}
				close(release)
				require.NoError(t, <-held)
				require.Eventually(t, func() bool { return countsOf(server).InFlight == 0 }, 10*time.Second, time.Millisecond)
				if ra != nil {
					time.Sleep(ra.RetryAfter + time.Millisecond)
				}
				require.NoError(t, call(context.Background(), client, stream, codes.OK), "the server hears calls again")
				require.Eventually(t, func() bool { return countsOf(lim).InFlight == 0 }, 10*time.Second, time.Millisecond)
				require.Equal(t, uint64(0), countsOf(lim).Ignored, "the refused call took no permit")
			})
		}
	}
}

// TestClassTravelsInMetadata calls a loopback server whose handlers report
// the class overload.ClassFromContext finds: the class of the client's
// context travels in ClassKey's metadata through the client interceptors,
// and the server interceptors put it in the handler's context; a class the
// call's metadata names stands; a call without a class has none.
func TestClassTravelsInMetadata(t *testing.T) {
	tests := []struct {
		name   string
		class  string // in the client's context
		md     string // in the call's own metadata
		direct bool   // the client has none of this package's interceptors
		want   string
	}{
		{"class", "critical", "", false, "critical"},
		{"none", "", "", false, ""},
		{"metadata stands", "critical", "sheddable", false, "sheddable"},
		{"from any client", "", "sheddable", true, "sheddable"},
	}
	for _, stream := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(map[bool]string{false: "unary", true: "stream"}[stream]+"/"+tt.name, func(t *testing.T) {
				seen := make(chan string, 1)
				report := func(ctx context.Context) {
					class, _ := overload.ClassFromContext(ctx)
					seen <- class
				}
				svc := &service{
					unary: func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
						report(ctx)
						return &testgrpc.SimpleResponse{}, nil
					},
					output: func(_ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
						report(ss.Context())
						return nil
					},
				}
				server, lim := fixedLimiter(t, 10), fixedLimiter(t, 10)
				dialOpts := []grpc.DialOption{
					grpc.WithChainUnaryInterceptor(adaptivegrpc.UnaryClientInterceptor(lim)),
					grpc.WithChainStreamInterceptor(adaptivegrpc.StreamClientInterceptor(lim)),
				}
				if tt.direct {
					dialOpts = nil
				}
				client := serve(t, svc, []grpc.ServerOption{
					grpc.ChainUnaryInterceptor(adaptivegrpc.UnaryServerInterceptor(server)),
					grpc.ChainStreamInterceptor(adaptivegrpc.StreamServerInterceptor(server)),
				}, dialOpts...)
				ctx := context.Background()
				if tt.class != "" {
					ctx = overload.ContextWithClass(ctx, tt.class)
				}
				if tt.md != "" {
					ctx = metadata.AppendToOutgoingContext(ctx, adaptivegrpc.ClassKey, tt.md)
				}
				require.NoError(t, call(ctx, client, stream, codes.OK))
				require.Equal(t, tt.want, <-seen)
			})
		}
	}
}

// TestServerAdmitsByTheClassThroughAGate serves, over loopback, a limit of
// 2 enforced by an overload.Gate whose sheddable class may hold 1: with
// one sheddable RPC held, a second sheddable one is shed and a critical
// one, its class sent in the metadata from the client's context, is
// admitted. The server interceptors admit by the class they received.
func TestServerAdmitsByTheClassThroughAGate(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "unary", true: "stream"}[stream], func(t *testing.T) {
			g, err := overload.New(1, 10, []overload.Class{{Name: "critical"}, {Name: "sheddable", MaxShare: 0.5}})
			require.NoError(t, err)
			server, err := adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(2, 2, 2), adaptive.WithGate(g))
			require.NoError(t, err)
			t.Cleanup(server.Close)
			started, release := make(chan struct{}, 1), make(chan struct{})
			var first atomic.Bool
			block := blocking(started, release)
			svc := &service{unary: func(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
				if first.CompareAndSwap(false, true) {
					return block(ctx, req)
				}
				return &testgrpc.SimpleResponse{}, nil
			}}
			client := serve(t, svc, []grpc.ServerOption{
				grpc.ChainUnaryInterceptor(adaptivegrpc.UnaryServerInterceptor(server)),
				grpc.ChainStreamInterceptor(adaptivegrpc.StreamServerInterceptor(server)),
			},
				grpc.WithChainUnaryInterceptor(adaptivegrpc.UnaryClientInterceptor(fixedLimiter(t, 10))),
				grpc.WithChainStreamInterceptor(adaptivegrpc.StreamClientInterceptor(fixedLimiter(t, 10))))
			sheddable := overload.ContextWithClass(context.Background(), "sheddable")
			critical := overload.ContextWithClass(context.Background(), "critical")
			held := make(chan error, 1)
			go func() {
				_, err := client.UnaryCall(sheddable, &testgrpc.SimpleRequest{})
				held <- err
			}()
			<-started
			require.Equal(t, codes.ResourceExhausted, status.Code(call(sheddable, client, stream, codes.OK)), "sheddable at its ceiling")
			require.NoError(t, call(critical, client, stream, codes.OK), "critical admitted")
			close(release)
			require.NoError(t, <-held)
			require.Eventually(t, func() bool { return g.Held() == 0 }, 10*time.Second, time.Millisecond)
		})
	}
}

// TestWaitingServerShedsByTheGate: a server interceptor WithWait on a
// gated Limiter whose gate bounds the wait sheds an RPC that waited too
// long with ResourceExhausted and the retry pushback, and the error
// matches the gate's.
func TestWaitingServerShedsByTheGate(t *testing.T) {
	g, err := overload.New(1, 10, []overload.Class{{Name: "critical"}}, overload.WithMaxWait(20*time.Millisecond))
	require.NoError(t, err)
	server, err := adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(1, 1, 1), adaptive.WithGate(g))
	require.NoError(t, err)
	t.Cleanup(server.Close)
	started, release := make(chan struct{}, 1), make(chan struct{})
	var first atomic.Bool
	block := blocking(started, release)
	svc := &service{unary: func(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		if first.CompareAndSwap(false, true) {
			return block(ctx, req)
		}
		return &testgrpc.SimpleResponse{}, nil
	}}
	shed := make(chan error, 1)
	record := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil {
			shed <- err
		}
		return resp, err
	}
	client := serve(t, svc, []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(record, adaptivegrpc.UnaryServerInterceptor(server, adaptivegrpc.WithWait())),
	})
	held := make(chan error, 1)
	go func() {
		_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		held <- err
	}()
	<-started
	var trailer metadata.MD
	_, err = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer))
	require.Equal(t, codes.ResourceExhausted, status.Code(err))
	require.Equal(t, []string{"1000"}, trailer.Get("grpc-retry-pushback-ms"))
	require.ErrorIs(t, <-shed, overload.ErrMaxWait, "the server's error is the gate's")
	close(release)
	require.NoError(t, <-held)
}
