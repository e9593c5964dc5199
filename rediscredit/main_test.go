package rediscredit_test

import (
	"context"
	"flag"
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
	flag.Parse() // so that the skip below adds to the command line's
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
		// An example cannot skip itself: without a server they are left
		// out, and the run says so.
		fmt.Fprintf(os.Stderr, "rediscredit: %s; the examples are skipped\n", noServer)
		skip := "^Example"
		if f := flag.Lookup("test.skip"); f != nil && f.Value.String() != "" {
			skip = f.Value.String() + "|" + skip
		}
		_ = flag.Set("test.skip", skip)
	}
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	if example.srv != nil {
		example.srv.stop()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
