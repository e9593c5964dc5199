package rediscreditbench_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// shared is the server the benchmarks use; nil, with noServer saying why,
// when no redis-server can be had outside CI.
var (
	shared   *server
	noServer string
)

func TestMain(m *testing.M) {
	bin := os.Getenv("REDIS_SERVER")
	var err error
	if bin == "" {
		bin, err = exec.LookPath("redis-server")
	}
	if err == nil {
		shared, err = startServer(bin)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "rediscreditbench: CI=true and no Redis server: %v\n", err)
			os.Exit(1)
		}
		noServer = fmt.Sprintf("no Redis server (%v): install redis-server, or set REDIS_SERVER to its path", err)
	}
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// server is a redis-server process on a free loopback port, persistence
// off, as rediscredit's own tests start one.
type server struct {
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

func startServer(bin string) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &server{port: port, done: make(chan struct{})}
	s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
	s.cmd.SysProcAttr = serverAttrs()
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err = c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server on port %d: %w", port, err)
		}
	}
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// needServer skips b when there is no shared server (never under CI).
func needServer(b testing.TB) *server {
	b.Helper()
	if shared == nil {
		b.Skip(noServer)
	}
	return shared
}

// counter is a go-redis hook that counts the commands sent, one per round
// trip.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "hello", "client", "auth", "select":
			// A new connection's handshake, once per connection.
		default:
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func itoa(n int) string { return strconv.Itoa(n) }
