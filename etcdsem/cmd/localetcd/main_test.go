package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The command serves a client on the address it prints, and stops when
// its context is done.
func TestServesUntilStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-addr", freeAddr(t)}, w); w.Close() }()
	lines := bufio.NewScanner(r)
	require.True(t, lines.Scan(), "nothing printed")
	endpoint, _, ok := strings.Cut(strings.TrimPrefix(lines.Text(), "etcd serving clients on "), ";")
	require.True(t, ok, "printed %q", lines.Text())

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	_, err = cli.Put(ctx, "k", "v")
	require.NoError(t, err)
	resp, err := cli.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "v", string(resp.Kvs[0].Value))
	cli.Close()

	cancel()
	for lines.Scan() { // "stopping", until the pipe closes
	}
	require.NoError(t, <-done)
}

// An address that is not on loopback is refused.
func TestRefusesANonLoopbackAddress(t *testing.T) {
	err := run(context.Background(), []string{"-addr", "0.0.0.0:2379"}, io.Discard)
	require.ErrorContains(t, err, "not a loopback address")
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}
