package etcdsem_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/atomicsem/atomicsem/etcdsem"
	"github.com/atomicsem/atomicsem/internal/faultnet"
)

// server is an etcd server run in this process on loopback, with a data
// directory of its own, quiet logging and short timeouts, so that a lease
// of one second is allowed (etcd's shortest is one and a half election
// timeouts, rounded up to a second).
type server struct {
	t         testing.TB
	dir       string
	clientURL url.URL
	peerURL   url.URL
	etcd      *embed.Etcd
	proxy     *faultnet.Proxy // if not nil, clients reach the server through it
}

// startServer starts a fresh server for t and stops it when t ends.
func startServer(t testing.TB) *server {
	t.Helper()
	srv := &server{
		t:         t,
		dir:       t.TempDir(),
		clientURL: url.URL{Scheme: "http", Host: freeAddr(t)},
		peerURL:   url.URL{Scheme: "http", Host: freeAddr(t)},
	}
	srv.start()
	t.Cleanup(srv.stop)
	return srv
}

// startServerBehindProxy starts a fresh server that clients reach through
// a proxy, which can cut the network between them.
func startServerBehindProxy(t testing.TB) *server {
	t.Helper()
	srv := startServer(t)
	srv.proxy = newProxy(t, srv.clientURL.Host)
	return srv
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeLoopback()
	require.NoError(t, err)
	return addr
}

func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// start starts the server on its data directory and waits until it serves.
func (srv *server) start() {
	srv.t.Helper()
	e, err := startEtcd(srv.dir, srv.clientURL, srv.peerURL)
	require.NoError(srv.t, err)
	srv.etcd = e
}

// startEtcd starts an etcd server in this process and waits until it
// serves.
func startEtcd(dir string, clientURL, peerURL url.URL) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "etcdsem-test"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case <-time.After(20 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcd did not become ready")
	}
}

// stop stops the server, keeping its data directory.
func (srv *server) stop() {
	if srv.etcd != nil {
		srv.etcd.Close()
		srv.etcd = nil
	}
}

// endpoint is the address clients dial.
func (srv *server) endpoint() string {
	if srv.proxy != nil {
		return "http://" + srv.proxy.Addr()
	}
	return srv.clientURL.String()
}

// newProxy returns a fault proxy to target, which carries etcd's gRPC
// (HTTP/2) for the clients that dial it, closed when t ends.
func newProxy(t testing.TB, target string) *faultnet.Proxy {
	t.Helper()
	p, err := faultnet.New(target, faultnet.WithProtocol(faultnet.HTTP2))
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// cut breaks the network between the server and the clients that reach
// it through its proxy: their connections are reset and new ones refused,
// until heal.
func (srv *server) cut() {
	srv.t.Helper()
	require.NoError(srv.t, srv.proxy.Refuse(true))
	srv.proxy.Reset()
}

// heal lets the clients reach the server through its proxy again.
func (srv *server) heal() {
	srv.t.Helper()
	require.NoError(srv.t, srv.proxy.Refuse(false))
}

// rpcCounter counts the unary calls a client makes, requests that each
// take one round trip to the server, the streams it opens (a watch stream
// or a lease's keep-alive stream), and the watch events it receives.
type rpcCounter struct{ calls, streams, events atomic.Int64 }

func (c *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.calls.Add(1)
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *rpcCounter) interceptStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	c.streams.Add(1)
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return eventCounter{cs, c}, nil
}

// eventCounter counts the events in the watch responses a stream
// receives.
type eventCounter struct {
	grpc.ClientStream
	c *rpcCounter
}

func (e eventCounter) RecvMsg(m any) error {
	err := e.ClientStream.RecvMsg(m)
	if resp, ok := m.(*pb.WatchResponse); ok && err == nil {
		e.c.events.Add(int64(len(resp.Events)))
	}
	return err
}

// newClient returns a client of srv, closed when t ends; if counter is not
// nil, it counts the client's round trips.
func newClient(t testing.TB, srv *server, counter *rpcCounter) *clientv3.Client {
	t.Helper()
	cfg := clientv3.Config{
		Endpoints:   []string{srv.endpoint()},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	}
	if counter != nil {
		cfg.DialOptions = []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(counter.intercept),
			grpc.WithChainStreamInterceptor(counter.interceptStream),
		}
	}
	cli, err := clientv3.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

// newSession returns a session on cli with a lease of ttl seconds, closed
// when t ends.
func newSession(t testing.TB, cli *clientv3.Client, ttl int) *concurrency.Session {
	t.Helper()
	// The session's context is also the one its lease is renewed under, so
	// it must outlive the session.
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl))
	require.NoError(t, err)
	t.Cleanup(func() { closeSession(cli, sess) })
	return sess
}

// closeSession ends sess and revokes its lease, giving up on the
// revocation after a second: a test that stopped its server must not wait
// out the lease (Session.Close waits up to the TTL).
func closeSession(cli *clientv3.Client, sess *concurrency.Session) {
	sess.Orphan()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cli.Revoke(ctx, sess.Lease())
}

// handle is one client's handle on a semaphore.
type handle struct {
	*etcdsem.Semaphore
	cli     *clientv3.Client
	session *concurrency.Session
	rpcs    *rpcCounter
}

// handleOpts are newHandle's settings.
type handleOpts struct {
	ttl    int             // session lease, in seconds; 10 if zero
	direct bool            // dial the server itself, not its proxy
	via    *faultnet.Proxy // dial this proxy (one of the handle's own) instead
	rpcs   *rpcCounter     // counts the handle's calls; a counter of its own if nil
	dial   []grpc.DialOption
	opts   []etcdsem.Option
}

// newHandle opens the semaphore under prefix on srv through a client and a
// session of its own, creating it with initial and max if it does not
// exist.
func newHandle(t testing.TB, srv *server, prefix string, initial, max int64, ho handleOpts) *handle {
	t.Helper()
	h, err := openHandle(t, srv, prefix, initial, max, ho)
	require.NoError(t, err)
	return h
}

// openHandle is newHandle for a goroutine other than the test's: it
// returns what went wrong instead of failing the test.
func openHandle(t testing.TB, srv *server, prefix string, initial, max int64, ho handleOpts) (*handle, error) {
	if ho.ttl == 0 {
		ho.ttl = 10
	}
	h := &handle{rpcs: ho.rpcs}
	if h.rpcs == nil {
		h.rpcs = &rpcCounter{}
	}
	endpoint := srv.endpoint()
	switch {
	case ho.via != nil:
		endpoint = "http://" + ho.via.Addr()
	case ho.direct:
		endpoint = srv.clientURL.String()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: append([]grpc.DialOption{
			grpc.WithChainUnaryInterceptor(h.rpcs.intercept),
			grpc.WithChainStreamInterceptor(h.rpcs.interceptStream),
		}, ho.dial...),
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { cli.Close() })
	h.cli = cli
	// The session's context is also the one its lease is renewed under, so
	// it must outlive the session.
	if h.session, err = concurrency.NewSession(cli, concurrency.WithTTL(ho.ttl)); err != nil {
		return nil, err
	}
	t.Cleanup(func() { closeSession(cli, h.session) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if h.Semaphore, err = etcdsem.New(ctx, h.session, prefix, initial, max, ho.opts...); err != nil {
		return nil, err
	}
	return h, nil
}

// testCtx returns a context that ends with t or after a generous limit, so
// that a hung call fails the test instead of hanging the run.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mustStats returns h's Stats.
func mustStats(t testing.TB, s *etcdsem.Semaphore) etcdsem.Stats {
	t.Helper()
	st, err := s.Stats(testCtx(t))
	require.NoError(t, err)
	st.Revision = 0
	return st
}

// prefixFor returns a prefix unique to t.
func prefixFor(t testing.TB) string { return fmt.Sprintf("/sem/%s/", t.Name()) }
