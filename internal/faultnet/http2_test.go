package faultnet_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/internal/faultnet"
)

// h2Server is a cleartext HTTP/2 server that records the body of every
// request it reads whole.
type h2Server struct {
	srv    *http.Server
	addr   string
	mu     sync.Mutex
	bodies []string
}

func startH2Server(t *testing.T) *h2Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &h2Server{addr: l.Addr().String()}
	s.srv = &http.Server{
		Protocols: new(http.Protocols),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return // the client reset the stream: no request
			}
			s.mu.Lock()
			s.bodies = append(s.bodies, string(b))
			s.mu.Unlock()
			io.WriteString(w, "ok")
		}),
	}
	s.srv.Protocols.SetUnencryptedHTTP2(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.srv.Serve(l)
	}()
	t.Cleanup(func() {
		s.srv.Close()
		<-done
	})
	return s
}

func (s *h2Server) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// h2Client returns an HTTP/2 client (prior knowledge, no TLS) and a count
// of the bytes it has written.
func h2Client(t *testing.T) (*http.Client, *atomic.Int64) {
	written := new(atomic.Int64)
	tr := &http.Transport{
		Protocols: new(http.Protocols),
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			return countingConn{c, written}, err
		},
	}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, written
}

// goPost posts body in a goroutine, and returns a channel that is closed
// once the client has written the whole request, and one that receives
// its outcome.
func goPost(ctx context.Context, c *http.Client, addr, body string) (wrote <-chan struct{}, failed <-chan error) {
	w, f := make(chan struct{}), make(chan error, 1)
	traced := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { close(w) },
	})
	go func() { f <- post(traced, c, addr, body) }()
	return w, f
}

// allHeldOrSent reports whether every byte the client wrote has been
// forwarded or is held.
func allHeldOrSent(written *atomic.Int64) func(faultnet.Stats) bool {
	return func(st faultnet.Stats) bool { return st.Forwarded[faultnet.Up]+int64(st.Held) == written.Load() }
}

// post sends body to addr; the body cannot be rewound, so the client
// never sends it twice.
func post(ctx context.Context, c *http.Client, addr, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/", io.NopCloser(strings.NewReader(body)))
	if err != nil {
		return err
	}
	req.Header.Set("X-Tenant", "a-header-value-that-the-encoder-indexes")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	return err
}

// A request held on an HTTP/2 connection that is then reset reaches the
// server late, on a connection of its own, and is applied there once; the
// requests the connection carried before it are not applied again, though
// their header blocks, which the late one's is compressed against, are
// sent again. DeliverLate returns once the server has answered.
func TestHTTP2LateRequestIsAppliedOnceAndAlone(t *testing.T) {
	srv := startH2Server(t)
	p := newProxy(t, srv.addr, faultnet.WithProtocol(faultnet.HTTP2))
	c, written := h2Client(t)
	ctx := testCtx(t)
	for _, body := range []string{"a", "b", "c"} {
		require.NoError(t, post(ctx, c, p.Addr(), body))
	}

	p.HoldWhen(func(b []byte) bool { return strings.Contains(string(b), "late-body") })
	wrote, failed := goPost(ctx, c, p.Addr(), "late-body")
	<-wrote
	require.NoError(t, p.Wait(ctx, allHeldOrSent(written)))
	require.Equal(t, 1, p.Stats().Holds)
	p.Reset()
	require.Error(t, <-failed, "the client saw its request answered")
	require.NoError(t, post(ctx, c, p.Addr(), "after"))
	require.Equal(t, []string{"a", "b", "c", "after"}, srv.received())

	n, err := p.DeliverLate(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{"a", "b", "c", "after", "late-body"}, srv.received())
	require.Zero(t, p.Stats().Lost)
}

// A connection held from its first byte is delivered whole, preface
// included.
func TestHTTP2ConnectionHeldFromItsStart(t *testing.T) {
	srv := startH2Server(t)
	p := newProxy(t, srv.addr, faultnet.WithProtocol(faultnet.HTTP2))
	c, written := h2Client(t)
	ctx := testCtx(t)
	p.Hold()
	wrote, failed := goPost(ctx, c, p.Addr(), "first")
	<-wrote
	require.NoError(t, p.Wait(ctx, allHeldOrSent(written)))
	require.Zero(t, p.Stats().Forwarded[faultnet.Up])
	p.Reset()
	p.Release()
	require.Error(t, <-failed)
	require.Empty(t, srv.received())
	n, err := p.DeliverLate(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{"first"}, srv.received())
}

// A stream that is not HTTP/2 cannot be replayed by the HTTP2 protocol:
// its batch is lost, and counted.
func TestHTTP2DropsWhatIsNotHTTP2(t *testing.T) {
	srv := startLineServer(t)
	p := newProxy(t, srv.addr(), faultnet.WithProtocol(faultnet.HTTP2))
	c := dialLines(t, p.Addr())
	require.Equal(t, "ok a", c.ask(t, "a"))
	p.HoldNext()
	c.send(t, "b")
	require.NoError(t, p.Wait(testCtx(t), func(st faultnet.Stats) bool { return st.Held > 0 }))
	p.Reset()
	st := p.Stats()
	require.Zero(t, st.Late)
	require.Equal(t, 1, st.Lost)
}

// countingConn counts the bytes written on a connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.n.Add(int64(n))
	return n, err
}
