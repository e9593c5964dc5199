package etcdsem_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/atomicsem/atomicsem/etcdsem/internal/localetcd"
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
// them (an example has no testing.T to start one of its own): the server
// that go run github.com/atomicsem/atomicsem/etcdsem/cmd/localetcd runs,
// in this process, on a free loopback port.
var example exampleServer

type exampleServer struct {
	once sync.Once
	srv  *localetcd.Server
}

// exampleEndpoint returns the address of the examples' server, starting it
// on first use.
func exampleEndpoint() string {
	example.once.Do(func() {
		var err error
		if example.srv, err = localetcd.Start("", ""); err != nil {
			panic(err)
		}
	})
	return example.srv.Endpoint
}

func (e *exampleServer) stop() {
	if e.srv != nil {
		e.srv.Close()
	}
}
