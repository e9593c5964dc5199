package adaptivegrpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptivegrpc"
)

// startHealthServer serves gRPC's health service on a loopback port with
// opts, as a real server would serve its own services.
func startHealthServer(opts ...grpc.ServerOption) (addr string, stop func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	return lis.Addr().String(), srv.Stop
}

// An adaptive limit for a gRPC server: the RPCs it cannot take fail at
// once with ResourceExhausted, and every RPC's outcome moves the limit.
func Example() {
	lim, err := adaptive.New(&adaptive.Gradient2{}, adaptive.WithLimits(20, 1, 500))
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	addr, stop := startHealthServer(
		grpc.ChainUnaryInterceptor(adaptivegrpc.UnaryServerInterceptor(lim)),
		grpc.ChainStreamInterceptor(adaptivegrpc.StreamServerInterceptor(lim)),
	)
	defer stop()

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println(resp.GetStatus(), err)
	st := lim.Stats()
	fmt.Printf("in flight %d, dropped %d, rejected %d\n", st.InFlight, st.Dropped, st.Rejected)
	// Output:
	// SERVING <nil>
	// in flight 0, dropped 0, rejected 0
}

// A client that adapts to its server: past its limit a call fails at once,
// without reaching the network, and errors.Is tells it from the server's
// own ResourceExhausted.
func ExampleUnaryClientInterceptor() {
	addr, stop := startHealthServer()
	defer stop()
	lim, err := adaptive.New(&adaptive.AIMD{}, adaptive.WithLimits(1, 1, 100))
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(adaptivegrpc.UnaryClientInterceptor(lim)),
		grpc.WithChainStreamInterceptor(adaptivegrpc.StreamClientInterceptor(lim)),
	)
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	var busy adaptive.Permit // the one slot, taken as a call in flight would
	lim.TryAcquire(&busy)
	_, err = client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println(status.Code(err), errors.Is(err, adaptive.ErrLimited))

	busy.End(adaptive.Ignored)
	_, err = client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println(status.Code(err))
	// Output:
	// ResourceExhausted true
	// OK
}
