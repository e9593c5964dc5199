package adaptivegrpc_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/adaptivegrpc"
)

// TestShedRPCCarriesARetryPushback sheds a unary RPC and a stream at a
// limit of 1 that another RPC holds, over loopback: each fails with
// ResourceExhausted and the trailer grpc-retry-pushback-ms, the hint
// grpc-go's retry reads (a second, by default, as Handler's Retry-After).
func TestShedRPCCarriesARetryPushback(t *testing.T) {
	tests := []struct {
		name string
		opts []adaptivegrpc.Option
		want string
	}{
		{"default", nil, "1000"},
		{"250ms", []adaptivegrpc.Option{adaptivegrpc.WithRetryPushback(250 * time.Millisecond)}, "250"},
		{"rounded up", []adaptivegrpc.Option{adaptivegrpc.WithRetryPushback(1500 * time.Microsecond)}, "2"},
		{"do not retry", []adaptivegrpc.Option{adaptivegrpc.WithRetryPushback(-1)}, "-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := fixedLimiter(t, 1)
			started, release := make(chan struct{}, 1), make(chan struct{})
			client, returned := limitedServer(t, lim, &service{unary: blocking(started, release)}, tt.opts...)
			held := make(chan error, 1)
			go func() {
				_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
				held <- err
			}()
			<-started

			var trailer metadata.MD
			_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer))
			require.Equal(t, codes.ResourceExhausted, status.Code(err))
			require.Equal(t, []string{tt.want}, trailer.Get("grpc-retry-pushback-ms"), "unary")

			stream, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
			require.NoError(t, err)
			_, err = stream.Recv()
			require.Equal(t, codes.ResourceExhausted, status.Code(err))
			require.Equal(t, []string{tt.want}, stream.Trailer().Get("grpc-retry-pushback-ms"), "stream")

			close(release)
			require.NoError(t, <-held)
			for range 3 {
				<-returned
			}
			require.Equal(t, counts{Succeeded: 1, Rejected: 2}, countsOf(lim))
		})
	}
}

// TestGRPCRetryWaitsForThePushback runs grpc-go's own retry against a
// server that sheds: a client whose service config retries
// ResourceExhausted with a backoff of 1 ms waits out the server's pushback
// of 300 ms before its second attempt, which succeeds, the slot having
// been freed after the first.
func TestGRPCRetryWaitsForThePushback(t *testing.T) {
	const pushback = 300 * time.Millisecond
	lim := fixedLimiter(t, 1)
	started, release := make(chan struct{}, 1), make(chan struct{})
	var mu sync.Mutex
	var attempts []time.Time
	attemptSeen := make(chan struct{}, 10)
	recordAttempts := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		mu.Lock()
		attempts = append(attempts, time.Now())
		mu.Unlock()
		attemptSeen <- struct{}{}
		return handler(ctx, req)
	}
	svc := &service{unary: blocking(started, release)}
	conn := dial(t, svc,
		[]grpc.ServerOption{grpc.ChainUnaryInterceptor(recordAttempts,
			adaptivegrpc.UnaryServerInterceptor(lim, adaptivegrpc.WithRetryPushback(pushback)))},
		grpc.WithDefaultServiceConfig(`{"methodConfig": [{
			"name": [{"service": "grpc.testing.TestService"}],
			"retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
				"backoffMultiplier": 1, "retryableStatusCodes": ["RESOURCE_EXHAUSTED"]}}]}`))
	client := testgrpc.NewTestServiceClient(conn)

	held := make(chan error, 1)
	go func() {
		_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		held <- err
	}()
	<-started
	<-attemptSeen

	retried := make(chan error, 1)
	go func() {
		_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		retried <- err
	}()
	<-attemptSeen // the first attempt, which the limit sheds
	require.Eventually(t, func() bool { return countsOf(lim).Rejected == 1 }, 10*time.Second, time.Millisecond)
	close(release)
	require.NoError(t, <-held)
	require.NoError(t, <-retried, "the retry after the pushback finds the slot free")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, attempts, 3)
	require.GreaterOrEqual(t, attempts[2].Sub(attempts[1]), pushback, "the retry did not wait for the pushback")
	require.Equal(t, counts{Succeeded: 2, Rejected: 1}, countsOf(lim))
}
