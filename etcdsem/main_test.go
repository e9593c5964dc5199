package etcdsem_test

import (
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: a parked
// Acquire or a watch that nobody stops is exactly the bug a semaphore must
// not have. The check runs after the examples' server has stopped.
func TestMain(m *testing.M) {
	code := m.Run()
	example.stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// example is the etcd server the examples use, started by the first of
// them: an example has no testing.T to start one of its own.
var example exampleServer

type exampleServer struct {
	once     sync.Once
	dir      string
	endpoint string
	etcd     *embed.Etcd
}

// exampleEndpoint returns the address of the examples' server, starting it
// on first use.
func exampleEndpoint() string {
	example.once.Do(func() {
		var err error
		if example.dir, err = os.MkdirTemp("", "etcdsem-example"); err != nil {
			panic(err)
		}
		clientAddr, err := freeLoopback()
		if err != nil {
			panic(err)
		}
		peerAddr, err := freeLoopback()
		if err != nil {
			panic(err)
		}
		clientURL := url.URL{Scheme: "http", Host: clientAddr}
		if example.etcd, err = startEtcd(example.dir, clientURL, url.URL{Scheme: "http", Host: peerAddr}); err != nil {
			panic(err)
		}
		example.endpoint = clientURL.String()
	})
	return example.endpoint
}

func (e *exampleServer) stop() {
	if e.etcd != nil {
		e.etcd.Close()
		os.RemoveAll(e.dir)
	}
}
