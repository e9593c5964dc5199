package faultnet_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/internal/faultnet"
)

// lineServer answers each line a connection sends with "ok " and the line,
// and records every line it reads, over all its connections.
type lineServer struct {
	l     net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	lines []string
	conns map[net.Conn]struct{}
}

func startLineServer(t *testing.T) *lineServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &lineServer{l: l, conns: make(map[net.Conn]struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					s.mu.Lock()
					s.lines = append(s.lines, sc.Text())
					s.mu.Unlock()
					if _, err := c.Write([]byte("ok " + sc.Text() + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *lineServer) addr() string { return s.l.Addr().String() }

// received returns the lines the server has read.
func (s *lineServer) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

func newProxy(t *testing.T, target string, opts ...faultnet.Option) *faultnet.Proxy {
	t.Helper()
	p, err := faultnet.New(target, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// lineClient is a client connection that sends lines and reads answers.
type lineClient struct {
	c net.Conn
	r *bufio.Reader
}

func dialLines(t *testing.T, addr string) *lineClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &lineClient{c: c, r: bufio.NewReader(c)}
}

func (lc *lineClient) send(t *testing.T, line string) {
	t.Helper()
	_, err := lc.c.Write([]byte(line + "\n"))
	require.NoError(t, err)
}

// answer reads one answer, waiting at most d.
func (lc *lineClient) answer(d time.Duration) (string, error) {
	lc.c.SetReadDeadline(time.Now().Add(d))
	s, err := lc.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

// ask sends line and returns the answer.
func (lc *lineClient) ask(t *testing.T, line string) string {
	t.Helper()
	lc.send(t, line)
	s, err := lc.answer(10 * time.Second)
	require.NoError(t, err)
	return s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// isTimeout reports whether err is a read that ran out of time.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestPassesThroughBothWays(t *testing.T) {
	srv := startLineServer(t)
	p := newProxy(t, srv.addr())
	c := dialLines(t, p.Addr())
	require.Equal(t, "ok a", c.ask(t, "a"))
	require.Equal(t, "ok b", c.ask(t, "b"))
	require.Equal(t, []string{"a", "b"}, srv.received())
	require.NoError(t, p.Wait(testCtx(t), func(st faultnet.Stats) bool { return st.Forwarded == [2]int64{4, 10} }))
	st := p.Stats()
	require.Equal(t, 1, st.Accepted)
	require.Equal(t, 1, st.Open)
	require.Equal(t, srv.addr(), p.Target())
}

// A delay holds each chunk back for at least its duration, in its
// direction, and keeps the order of the chunks.
func TestDelayHoldsEachChunkBackInOrder(t *testing.T) {
	const d = 100 * time.Millisecond
	srv := startLineServer(t)
	p := newProxy(t, srv.addr())
	c := dialLines(t, p.Addr())
	for _, dir := range []faultnet.Dir{faultnet.Up, faultnet.Down} {
		t.Run(dir.String(), func(t *testing.T) {
			p.Delay(dir, d)
			defer p.Delay(dir, 0)
			start := time.Now()
			c.send(t, dir.String()+"1")
			c.send(t, dir.String()+"2")
			for _, want := range []string{"ok " + dir.String() + "1", "ok " + dir.String() + "2"} {
				got, err := c.answer(10 * time.Second)
				require.NoError(t, err)
				require.Equal(t, want, got)
			}
			require.GreaterOrEqual(t, time.Since(start), d)
		})
	}
	require.Positive(t, p.Stats().Delayed)
}

// A hold keeps what the client sends from the server, in order, until
// Release forwards it; the server's answers to what came before still
// reach the client.
func TestHoldKeepsTheClientsBytesUntilRelease(t *testing.T) {
	srv := startLineServer(t)
	p := newProxy(t, srv.addr())
	c := dialLines(t, p.Addr())
	require.Equal(t, "ok a", c.ask(t, "a"))

	p.HoldNext()
	c.send(t, "b")
	require.NoError(t, p.Wait(testCtx(t), func(st faultnet.Stats) bool { return st.Held == 2 }))
	c.send(t, "c")
	require.NoError(t, p.Wait(testCtx(t), func(st faultnet.Stats) bool { return st.Held == 4 }))
	require.Equal(t, []string{"a"}, srv.received(), "held bytes reached the server")
	require.Equal(t, 1, p.Stats().Holds)

	p.Release()
	c.send(t, "d")
	require.Equal(t, "ok b", mustAnswer(t, c))
	require.Equal(t, "ok c", mustAnswer(t, c))
	require.Equal(t, "ok d", mustAnswer(t, c))
	require.Equal(t, []string{"a", "b", "c", "d"}, srv.received())
	require.Zero(t, p.Stats().Held)
}

func mustAnswer(t *testing.T, c *lineClient) string {
	t.Helper()
	s, err := c.answer(10 * time.Second)
	require.NoError(t, err)
	return s
}

// HoldWhen holds one connection, from the first chunk that matches: the
// chunks before it pass, and so does a match on another connection once
// one connection holds. Hold holds every connection.
func TestHoldWhenHoldsOneConnectionFromTheMatch(t *testing.T) {
	srv := startLineServer(t)
	p := newProxy(t, srv.addr())
	c1 := dialLines(t, p.Addr())
	c2 := dialLines(t, p.Addr())
	p.HoldWhen(func(b []byte) bool { return strings.Contains(string(b), "x") })
	require.Equal(t, "ok y1", c1.ask(t, "y1"))
	c1.send(t, "x1")
	require.NoError(t, p.Wait(testCtx(t), func(st faultnet.Stats) bool { return st.Holds == 1 }))
	require.Equal(t, "ok x2", c2.ask(t, "x2"), "the hold is armed once")
	require.Equal(t, []string{"y1", "x2"}, srv.received())

	p.Release()
	require.Equal(t, "ok x1", mustAnswer(t, c1))

	p.Hold()
	c1.send(t, "h1")
	c2.send(t, "h2")
	require.NoError(t, p.Wait(testCtx(t), func(st faultnet.Stats) bool { return st.Holds == 3 && st.Held == 6 }))
	p.Release()
	require.Equal(t, "ok h1", mustAnswer(t, c1))
	require.Equal(t, "ok h2", mustAnswer(t, c2))
}

// Reset closes the connections abruptly, on both sides; what a connection
// held becomes a late batch, which DeliverLate writes to the server on a
// fresh connection. The client, meanwhile, can connect again.
func TestResetMakesWhatWasHeldLate(t *testing.T) {
	srv := startLineServer(t)
	p := newProxy(t, srv.addr())
	c := dialLines(t, p.Addr())
	require.Equal(t, "ok a", c.ask(t, "a"))
	p.HoldNext()
	c.send(t, "late")
	require.NoError(t, p.Wait(testCtx(t), func(st faultnet.Stats) bool { return st.Held > 0 }))

	p.Reset()
	_, err := c.answer(10 * time.Second)
	require.Error(t, err)
	require.False(t, isTimeout(err), "the client must see the connection end: %v", err)
	st := p.Stats()
	require.Equal(t, 1, st.Resets)
	require.Zero(t, st.Open)
	require.Equal(t, 1, st.Late)
	require.Zero(t, st.Held)

	again := dialLines(t, p.Addr())
	require.Equal(t, "ok b", again.ask(t, "b"))
	require.Equal(t, []string{"a", "b"}, srv.received())

	n, err := p.DeliverLate(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Eventually(t, func() bool { return len(srv.received()) == 3 }, 10*time.Second, time.Millisecond)
	require.Equal(t, []string{"a", "b", "late"}, srv.received())
	st = p.Stats()
	require.Equal(t, 1, st.Delivered)
	require.Zero(t, st.Late)

	// A batch can be dropped instead.
	p.HoldNext()
	again.send(t, "never")
	require.NoError(t, p.Wait(testCtx(t), func(st faultnet.Stats) bool { return st.Held > 0 }))
	p.Reset()
	require.Equal(t, 1, p.DiscardLate())
	require.Equal(t, 1, p.Stats().Lost)
	n, err = p.DeliverLate(testCtx(t))
	require.NoError(t, err)
	require.Zero(t, n)
}

// Bytes read and not yet forwarded because of a delay are late too, when
// their connection is reset.
func TestResetMakesDelayedBytesLate(t *testing.T) {
	srv := startLineServer(t)
	p := newProxy(t, srv.addr())
	c := dialLines(t, p.Addr())
	p.Delay(faultnet.Up, time.Hour)
	c.send(t, "slow")
	require.NoError(t, p.Wait(testCtx(t), func(st faultnet.Stats) bool { return st.Queued[faultnet.Up] == 5 }))
	p.Reset()
	require.Equal(t, 1, p.Stats().Late)
	require.Zero(t, p.Stats().Queued[faultnet.Up])
	p.Delay(faultnet.Up, 0)
	_, err := p.DeliverLate(testCtx(t))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(srv.received()) == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, []string{"slow"}, srv.received())
}

// Drop discards one direction: with the answers dropped, the server does
// what the client asked and the client never hears of it. A black hole
// forwards nothing either way, and a connection made meanwhile never
// reaches the server.
func TestDropAndBlackHoleDiscard(t *testing.T) {
	srv := startLineServer(t)
	p := newProxy(t, srv.addr())
	c := dialLines(t, p.Addr())
	require.Equal(t, "ok a", c.ask(t, "a"))

	p.Drop(faultnet.Down, true)
	c.send(t, "b")
	require.Eventually(t, func() bool { return len(srv.received()) == 2 }, 10*time.Second, time.Millisecond)
	require.NoError(t, p.Wait(testCtx(t), func(st faultnet.Stats) bool { return st.Dropped == 5 }), "the answer was not dropped")
	p.Drop(faultnet.Down, false)

	p.BlackHole(true)
	c.send(t, "c")
	hole := dialLines(t, p.Addr())
	hole.send(t, "d")
	require.NoError(t, p.Wait(testCtx(t), func(st faultnet.Stats) bool { return st.Dropped == 9 }))
	require.Equal(t, []string{"a", "b"}, srv.received())
	_, err := hole.answer(50 * time.Millisecond)
	require.True(t, isTimeout(err), "a black hole answers nothing: %v", err)

	p.BlackHole(false)
	p.Reset()
	c = dialLines(t, p.Addr())
	require.Equal(t, "ok e", c.ask(t, "e"))
}

// A proxy that refuses connections makes a dial fail at once, as a server
// that is down does; the connections open stay open.
func TestRefuseRefusesNewConnections(t *testing.T) {
	srv := startLineServer(t)
	p := newProxy(t, srv.addr())
	open := dialLines(t, p.Addr())
	// Connections not yet accepted are reset when the listener closes.
	require.NoError(t, p.Wait(testCtx(t), func(st faultnet.Stats) bool { return st.Accepted == 1 }))
	require.NoError(t, p.Refuse(true))
	_, err := net.Dial("tcp", p.Addr())
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.Equal(t, "ok a", open.ask(t, "a"))

	require.NoError(t, p.Refuse(false))
	require.Equal(t, "ok b", dialLines(t, p.Addr()).ask(t, "b"))
}

// A proxy whose server is down resets the connections it accepts.
func TestServerDownResetsTheClient(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	p := newProxy(t, addr)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		require.ErrorIs(t, err, syscall.ECONNRESET) // reset before the dial returned
		return
	}
	defer c.Close()
	c.Write([]byte("a\n"))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err)
	require.False(t, isTimeout(err), "%v", err)
}

// Close ends every connection and goroutine, and the calls that need the
// proxy open fail afterwards.
func TestCloseEndsEverything(t *testing.T) {
	srv := startLineServer(t)
	p, err := faultnet.New(srv.addr())
	require.NoError(t, err)
	c := dialLines(t, p.Addr())
	require.Equal(t, "ok a", c.ask(t, "a"))
	p.HoldNext()
	c.send(t, "b")
	require.NoError(t, p.Wait(testCtx(t), func(st faultnet.Stats) bool { return st.Held > 0 }))
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	_, err = c.answer(10 * time.Second)
	require.Error(t, err)
	require.ErrorIs(t, p.Refuse(false), faultnet.ErrClosed)
	_, err = p.DeliverLate(testCtx(t))
	require.ErrorIs(t, err, faultnet.ErrClosed)
	require.Zero(t, p.Stats().Late)
}

// Wait returns the context's error when the condition never holds.
func TestWaitEndsWithItsContext(t *testing.T) {
	p := newProxy(t, "127.0.0.1:1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := p.Wait(ctx, func(st faultnet.Stats) bool { return st.Accepted > 0 })
	require.Equal(t, context.DeadlineExceeded, err)
}

func TestNilOptionPanics(t *testing.T) {
	require.PanicsWithValue(t, "faultnet: New: nil Option", func() { faultnet.New("127.0.0.1:1", nil) })
}
