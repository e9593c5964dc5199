package adaptivegrpc_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptive/adaptivetest/wire"
	"github.com/atomicsem/atomicsem/adaptivegrpc"
)

// backendService serves the wire scenarios' Backend as a TestService:
// UnaryCall answers OK, Internal (a server error), Unavailable (the
// backend overloaded) or, once the RPC's context ended, its error.
type backendService struct {
	testgrpc.UnimplementedTestServiceServer
	b *wire.Backend
}

func (s backendService) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	switch s.b.Serve(ctx) {
	case wire.OK:
		return &testgrpc.SimpleResponse{}, nil
	case wire.Error:
		return nil, status.Error(codes.Internal, "backend failed")
	case wire.Overloaded:
		return nil, status.Error(codes.Unavailable, "backend overloaded")
	}
	return nil, status.FromContextError(ctx.Err()).Err()
}

// grpcStack returns the Stack of a gRPC server and client on the wire
// scenarios' Backend, with the limiter's interceptors on the server or on
// the client.
func grpcStack(name string, server bool) wire.Stack {
	return wire.Stack{Name: name, Start: func(n wire.Network, lim *adaptive.Limiter, b *wire.Backend) (wire.Client, func()) {
		lis, dial := n.Listen()
		var srvOpts []grpc.ServerOption
		dialOpts := []grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return dial(ctx) }),
		}
		if server {
			srvOpts = append(srvOpts, grpc.ChainUnaryInterceptor(adaptivegrpc.UnaryServerInterceptor(lim)))
		} else {
			dialOpts = append(dialOpts, grpc.WithChainUnaryInterceptor(adaptivegrpc.UnaryClientInterceptor(lim)))
		}
		srv := grpc.NewServer(srvOpts...)
		testgrpc.RegisterTestServiceServer(srv, backendService{b: b})
		var served sync.WaitGroup
		served.Add(1)
		go func() {
			defer served.Done()
			_ = srv.Serve(lis)
		}()
		conn, err := grpc.NewClient("passthrough:///backend", dialOpts...)
		if err != nil {
			panic(err)
		}
		client := testgrpc.NewTestServiceClient(conn)
		return func(ctx context.Context) wire.Answer {
				_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
				switch {
				case err == nil:
					return wire.OK
				case errors.Is(err, adaptive.ErrLimited):
					return wire.Shed
				case ctx.Err() != nil:
					return wire.Gone
				}
				switch status.Code(err) {
				case codes.ResourceExhausted:
					return wire.Shed
				case codes.Unavailable:
					return wire.Overloaded
				case codes.Internal:
					return wire.Error
				}
				return wire.Failed
			}, func() {
				_ = conn.Close()
				srv.Stop()
				served.Wait()
			}
	}}
}

// The gRPC stacks: the limiter on the server (UnaryServerInterceptor) or on
// the client (UnaryClientInterceptor).
var (
	grpcServer = grpcStack("gRPC server", true)
	grpcClient = grpcStack("gRPC client", false)
)

// wireControllers are the controllers the wire scenarios run, by name, the
// default first; AIMD's Timeout is a tenth above the service time.
var wireControllers = []struct {
	name string
	ctrl func(s wire.Scenario) adaptive.Controller
}{
	{"Gradient2", func(wire.Scenario) adaptive.Controller { return &adaptive.Gradient2{} }},
	{"AIMD", func(s wire.Scenario) adaptive.Controller {
		return &adaptive.AIMD{Timeout: s.ServiceTime + s.ServiceTime/10}
	}},
	{"Vegas", func(wire.Scenario) adaptive.Controller { return &adaptive.Vegas{} }},
}

// stackMatters are the scenarios the short run over loopback runs through
// the gRPC stacks (package adaptive runs the others through Handler):
// those in which where the limit sits and how an RPC ends differ from one
// stack to another.
var stackMatters = map[string]bool{
	"total failure":                  true,
	"hang until the client gives up": true,
	"fast errors":                    true,
	"short deadlines":                true,
}

// TestWireScenarios runs the wire scenarios in real time over loopback
// gRPC, through the server interceptor and the client interceptor, each
// beside its fixed-limit reference, and requires the default controller,
// Gradient2, to pass: with ADAPTIVE_WIRE=short, the scenarios in which the
// stack matters, with the short phases; with ADAPTIVE_WIRE=full, every
// scenario and controller, with the full phases, reporting AIMD's and
// Vegas's verdicts without requiring them. ADAPTIVE_WIRE_OUT=FILE appends
// every verdict to FILE (see wire.AppendRecord). Unset, it is skipped.
func TestWireScenarios(t *testing.T) {
	var lengths wire.Lengths
	full := false
	switch m := os.Getenv("ADAPTIVE_WIRE"); m {
	case "short":
		lengths = wire.Short
	case "full":
		lengths, full = wire.Full, true
	case "":
		t.Skip("real-time scenarios over loopback: set ADAPTIVE_WIRE=short or full")
	default:
		t.Fatalf("ADAPTIVE_WIRE=%q: want short or full", m)
	}
	for _, stack := range []wire.Stack{grpcServer, grpcClient} {
		for _, c := range wireControllers {
			if !full && c.name != "Gradient2" {
				continue
			}
			for _, sc := range wire.Scenarios(lengths) {
				if !full && !stackMatters[sc.Name] {
					continue
				}
				t.Run(stack.Name+"/"+c.name+"/"+strings.ReplaceAll(sc.Name, " ", "_"), func(t *testing.T) {
					start := time.Now()
					run := sc.RunUntilValid
					if !full {
						run = sc.RunUntilPassed // see TestWireScenarios
					}
					v, attempts := run(wire.Loopback, stack, func() adaptive.Controller { return c.ctrl(sc) }, 4)
					t.Logf("%d attempts in %.1f s", attempts, time.Since(start).Seconds())
					judgeWire(t, c.name, v, "loopback")
				})
			}
		}
	}
}

// TestWireScenariosInFakeTime runs every wire scenario through both gRPC
// stacks over in-memory pipes inside testing/synctest bubbles, the whole
// gRPC stack in fake time, and requires the default controller to pass
// with the short phases, in one of the trials wire.Trials allows (a run
// in fake time is one trial of an order of goroutines the scheduler
// picks); under the race detector, the hang only. With ADAPTIVE_WIRE=full
// it runs AIMD and Vegas too, with the full phases, and reports the first
// run of each.
func TestWireScenariosInFakeTime(t *testing.T) {
	lengths, full := wire.Short, os.Getenv("ADAPTIVE_WIRE") == "full"
	if full {
		lengths = wire.Full
	}
	for _, stack := range []wire.Stack{grpcServer, grpcClient} {
		for _, c := range wireControllers {
			if !full && c.name != "Gradient2" {
				continue
			}
			for _, sc := range wire.Scenarios(lengths) {
				if raceEnabled && sc.Name != "hang until the client gives up" {
					continue
				}
				t.Run(stack.Name+"/"+c.name+"/"+strings.ReplaceAll(sc.Name, " ", "_"), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						v, n := sc.RunUntilPassed(wire.Pipes, stack, func() adaptive.Controller { return c.ctrl(sc) }, wire.Trials(full))
						t.Logf("%d trials", n)
						judgeWire(t, c.name, v, "fake time")
					})
				})
			}
		}
	}
}

// judgeWire logs v, appends it to ADAPTIVE_WIRE_OUT if set, and, for the
// default controller, requires it valid and passed.
func judgeWire(t *testing.T, ctrl string, v wire.Verdict, network string) {
	t.Logf("%v: %s", v.Pass, v.Figures())
	if !v.Valid {
		t.Logf("not valid: %s", v.Invalid)
	}
	if os.Getenv("WIRE_PHASES") != "" {
		for i, p := range v.SubjectTrace {
			if i%10 == 0 {
				t.Logf(" %.1f:%d", p.At.Seconds(), p.Limit)
			}
		}
		for i := range v.Subject {
			for _, p := range []wire.PhaseResult{v.Subject[i], v.Reference[i]} {
				t.Logf("  %-9s limit %d–%d (mean %.1f); goodput %.0f/s p50 %v p99 %v; answers %v; succeeded %d dropped %d ignored %d",
					p.Name, p.Low, p.High, p.Mean, p.Goodput, p.P50, p.P99, p.Answers, p.Succeeded, p.Dropped, p.Ignored)
			}
		}
	}
	if out := os.Getenv("ADAPTIVE_WIRE_OUT"); out != "" {
		require.NoError(t, wire.AppendRecord(out, wire.Record{Controller: ctrl, Network: network, Verdict: v}))
	}
	if ctrl == "Gradient2" {
		require.True(t, v.Valid, "the machine could not serve the clients in time: %s", v.Invalid)
		require.True(t, v.Pass, "%s", v.Figures())
	}
}
