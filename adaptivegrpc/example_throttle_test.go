package adaptivegrpc_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptivegrpc"
	"github.com/atomicsem/atomicsem/overload"
)

// Back off before the server has to shed: a client whose server refuses
// every call with ResourceExhausted refuses most of its own calls locally,
// and sends only the few that tell it when the server can take more.
func ExampleWithThrottle() {
	var reached atomic.Int64
	overloaded := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		reached.Add(1)
		return nil, status.Error(codes.ResourceExhausted, "overloaded")
	}
	addr, stop := startHealthServer(grpc.ChainUnaryInterceptor(overloaded))
	defer stop()

	lim, _ := adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(10, 1, 100))
	defer lim.Close()
	throttle, _ := overload.NewThrottle(overload.DefaultThrottleK, time.Minute)
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(adaptivegrpc.UnaryClientInterceptor(lim, adaptivegrpc.WithThrottle(throttle))),
	)
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	throttled := 0
	for range 300 {
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if errors.Is(err, adaptive.ErrThrottled) {
			throttled++
		}
	}
	// The n-th call goes out with probability 1/n: about six of 300.
	fmt.Println("all counted:", throttled+int(reached.Load()) == 300)
	fmt.Println("fewer than 30 reached the server:", reached.Load() < 30)
	// Output:
	// all counted: true
	// fewer than 30 reached the server: true
}
