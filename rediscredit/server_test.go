package rediscredit_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// server is a redis-server process that a test started, on a loopback
// port, with persistence off.
type server struct {
	bin  string
	port int
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// serverBinary returns the path of redis-server: $REDIS_SERVER, or the one
// on $PATH.
func serverBinary() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		return p, nil
	}
	return exec.LookPath("redis-server")
}

// freePort returns a loopback port that nothing listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startServer starts redis-server on port (a free one if 0) and returns
// once it answers PING.
func startServer(bin string, port int) (*server, error) {
	var err error
	for range 5 {
		p := port
		if p == 0 {
			if p, err = freePort(); err != nil {
				return nil, err
			}
		}
		s := &server{bin: bin, port: p, done: make(chan struct{})}
		s.cmd = exec.Command(bin, "--port", strconv.Itoa(p), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
		s.cmd.SysProcAttr = serverAttrs()
		if err = s.cmd.Start(); err != nil {
			return nil, err
		}
		go func() { _ = s.cmd.Wait(); close(s.done) }()
		if err = s.ready(); err == nil {
			return s, nil
		}
		s.stop()
		if port != 0 {
			break
		}
	}
	return nil, err
}

// ready waits up to 5 s for the server to answer PING.
func (s *server) ready() error {
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("redis-server on port %d exited: %v", s.port, s.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on port %d: %w", s.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// kill stops the server at once, as a crash would, and waits for it.
func (s *server) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// stop ends the server and waits for it.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.kill()
	}
}

// needServer skips t when there is no shared server (never under CI).
func needServer(t testing.TB) *server {
	t.Helper()
	if shared == nil {
		t.Skip(noServer)
	}
	return shared
}

// client returns a client of addr, closed when t ends. Its calls end at
// their context's deadline.
func client(t testing.TB, addr string, hooks ...redis.Hook) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		MaxRetries:            1,
	})
	for _, h := range hooks {
		c.AddHook(h)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// key returns a key unique to t, so tests that share the server share no
// bucket.
func key(t testing.TB) string { return "test:" + t.Name() }

// counter is a go-redis hook that counts the commands sent, one per round
// trip (pipelines count as one).
type counter struct{ n, pipelines atomic.Int64 }

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
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.pipelines.Add(1)
		return next(ctx, cmds)
	}
}

// ttl returns key's PTTL: -2 if it does not exist, -1 if it never expires.
func ttl(t testing.TB, c *redis.Client, k string) time.Duration {
	t.Helper()
	d, err := c.PTTL(context.Background(), k).Result()
	require.NoError(t, err)
	return d
}
