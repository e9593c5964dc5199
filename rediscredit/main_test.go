package rediscredit_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// shared is the server most tests use; nil, with noServer saying why, when
// no redis-server can be had outside CI.
var (
	shared   *server
	noServer string
)

// quiet drops go-redis's log lines: the fault tests make it log each
// failed dial.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	bin, err := serverBinary()
	if err == nil {
		shared, err = startServer(bin, 0)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "rediscredit: CI=true and no Redis server: %v\n", err)
			os.Exit(1)
		}
		noServer = fmt.Sprintf("no Redis server (%v): install redis-server, or set REDIS_SERVER to its path; under CI=true these tests fail instead", err)
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
