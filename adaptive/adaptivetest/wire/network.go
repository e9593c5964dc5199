package wire

import (
	"context"
	"net"
	"sync"
)

// A Network is where a Stack's servers listen and its clients dial.
// Loopback is the real one; Pipes is one in memory, for a run inside a
// testing/synctest bubble, where the whole stack runs in fake time.
type Network interface {
	// Listen returns a listener and a function that dials it.
	Listen() (net.Listener, func(ctx context.Context) (net.Conn, error))
}

// Loopback is TCP on 127.0.0.1. Its client connections close with a reset
// rather than a FIN, as SO_LINGER 0 makes them, so that the thousands of
// connections a scenario's cancelled requests close leave no sockets in
// TIME_WAIT to use up the ephemeral ports, where clients on many hosts
// would not.
var Loopback Network = loopback{}

type loopback struct{}

func (loopback) Listen() (net.Listener, func(ctx context.Context) (net.Conn, error)) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("wire: " + err.Error())
	}
	var d net.Dialer
	addr := lis.Addr().String()
	return lis, func(ctx context.Context) (net.Conn, error) {
		c, err := d.DialContext(ctx, "tcp", addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		return c, err
	}
}

// Pipes is a network of net.Pipe connections, which a testing/synctest
// bubble can wait on: a run whose stack dials it runs in fake time, where
// neither the machine's load nor the stack's own CPU time moves a figure.
// It must be used inside the bubble that runs the scenario.
var Pipes Network = pipes{}

type pipes struct{}

func (pipes) Listen() (net.Listener, func(ctx context.Context) (net.Conn, error)) {
	l := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	return l, l.dial
}

// pipeListener hands the server's end of each dialled pipe to Accept.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.done:
		return nil, net.ErrClosed
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
