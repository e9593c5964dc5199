// Package faultnet is a TCP proxy that stands between one client and its
// server and puts the faults of a real network between them on a test's
// command: it passes bytes through, delays them, holds what the client
// sends and releases it later, resets connections, drops bytes, answers
// nothing, refuses connections, and delivers what a reset connection held
// late, to the server, on a fresh connection, as a request the client gave
// up on can still reach a server and be applied there.
//
// Every fault is a call that takes effect before it returns, so a test
// drives the proxy step by step; Stats counts what the proxy did, and Wait
// blocks until a count says that a fault has taken hold (a connection began
// holding, say).
//
// # Holding and late delivery
//
// A connection that holds stops forwarding what its client sends from one
// chunk on (a chunk is what one read from the client returns), and buffers
// it, in order; what the server sends still reaches the client. Release
// forwards the buffer and carries on. Reset instead closes the connection,
// and what it held, with what it had read and not yet forwarded, is kept as
// a late batch: DeliverLate opens a fresh connection to the server and
// writes each batch there. The server must be able to read a batch on a
// connection of its own, which for most protocols takes more than the held
// bytes: HTTP/2 needs the connection preface, the client's settings and
// every header block the connection carried, since each is compressed
// against the ones before it. A Protocol says what a fresh connection must
// carry first, without repeating a request the server already received
// (see HTTP2), and how to tell that the server has answered every request
// of the batch, so that DeliverLate returns only once the late requests
// have been applied.
//
// The package is for tests and tools; it talks only to the addresses it is
// given and listens on loopback.
package faultnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Dir is a direction of the bytes a proxy carries.
type Dir int

const (
	// Up is the direction from the client to the server.
	Up Dir = iota
	// Down is the direction from the server to the client.
	Down
)

func (d Dir) String() string {
	if d == Up {
		return "up"
	}
	return "down"
}

// dialTimeout bounds the proxy's connection to the server, for each
// connection it accepts and each late batch it delivers.
const dialTimeout = 5 * time.Second

// ErrClosed is returned by the calls made on a closed Proxy that need it
// open.
var ErrClosed = errors.New("faultnet: proxy is closed")

// Proxy forwards the connections of one client to a server, with faults
// (see the package documentation). It is safe for concurrent use. The zero
// value is not a proxy: make one with New.
type Proxy struct {
	target string
	proto  Protocol
	addr   string
	wg     sync.WaitGroup // the accept loop and each connection's goroutines

	mu        sync.Mutex
	l         net.Listener // nil while refusing or closed, guarded by mu
	closed    bool         // guarded by mu
	conns     map[*conn]struct{}
	delay     [2]time.Duration
	drop      [2]bool
	blackHole bool
	holdAll   bool              // every connection holds, from its next chunk
	armed     bool              // the next chunk that matches starts a hold
	match     func([]byte) bool // the armed hold's predicate; nil matches any chunk
	late      []*lateBatch      // waiting for DeliverLate, oldest first
	lateConns map[net.Conn]struct{}
	stats     Stats
	changed   chan struct{} // closed and replaced at every change of stats
}

// Stats counts what a proxy has done. Every field but Open, Held, Queued
// and Late only grows.
type Stats struct {
	Accepted  int      // connections accepted from the client
	Open      int      // connections open now
	Resets    int      // connections closed by Reset
	Holds     int      // times a connection began holding
	Held      int      // bytes held now, not yet released or made late
	Queued    [2]int   // bytes read and not yet forwarded (a delay), by direction
	Delayed   int      // chunks forwarded after a delay
	Dropped   int64    // bytes discarded by Drop or BlackHole
	Late      int      // late batches waiting for DeliverLate
	Delivered int      // late batches delivered by DeliverLate
	Lost      int      // late batches discarded (DiscardLate) or that the protocol could not replay
	Forwarded [2]int64 // bytes forwarded, by direction (Up, Down)
}

// An Option configures a Proxy in New.
type Option func(*Proxy)

// WithProtocol sets what the proxy knows of the protocol it carries, for
// late deliveries; the default is Raw.
func WithProtocol(p Protocol) Option {
	return func(px *Proxy) {
		if p != nil {
			px.proto = p
		}
	}
}

// New starts a proxy to target (a host:port), listening on a free port of
// 127.0.0.1, and passing everything through until told otherwise. Close
// stops it. New returns an error if it cannot listen.
func New(target string, opts ...Option) (*Proxy, error) {
	p := &Proxy{
		target:    target,
		proto:     Raw,
		conns:     make(map[*conn]struct{}),
		lateConns: make(map[net.Conn]struct{}),
		changed:   make(chan struct{}),
	}
	for _, opt := range opts {
		if opt == nil {
			panic("faultnet: New: nil Option")
		}
		opt(p)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultnet: %w", err)
	}
	p.addr = l.Addr().String()
	p.l = l
	p.wg.Add(1)
	go p.accept(l)
	return p, nil
}

// Addr returns the address the client connects to.
func (p *Proxy) Addr() string { return p.addr }

// Target returns the address of the server.
func (p *Proxy) Target() string { return p.target }

// Close stops the proxy: it stops listening, closes every connection
// abruptly, its late deliveries' included, drops the late batches, and
// waits for its goroutines to end. Closing a closed proxy does nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	conns := p.takeConns()
	for c := range p.lateConns {
		abort(c)
	}
	p.stats.Lost += len(p.late)
	p.late = nil
	p.stats.Late = 0
	p.notify()
	p.mu.Unlock()
	for _, c := range conns {
		c.kill()
	}
	p.wg.Wait()
	return nil
}

// Delay makes the proxy forward each chunk in direction dir d after it
// was read, keeping their order; zero forwards at once. It applies to
// every connection, open or new, and to chunks read from now on.
func (p *Proxy) Delay(dir Dir, d time.Duration) {
	p.mu.Lock()
	p.delay[dir] = max(d, 0)
	p.mu.Unlock()
}

// Drop makes the proxy discard what it reads in direction dir (on) or
// forward it again (off), on every connection, open or new. A byte stream
// with a hole in it is broken: a connection that dropped bytes usually
// has to be reset for its client and server to talk again.
func (p *Proxy) Drop(dir Dir, on bool) {
	p.mu.Lock()
	p.drop[dir] = on
	p.mu.Unlock()
}

// BlackHole makes the proxy answer nothing (on): it still accepts
// connections, but discards what it reads either way and does not connect
// a new one to the server; off forwards again on the connections that
// have a server, whose byte streams now have holes (see Drop). A
// connection accepted while the proxy was a black hole stays one until it
// is reset. A partition that heals, after which TCP delivers what it had
// kept back, is a Delay, or a Hold and Release of what the client sends.
func (p *Proxy) BlackHole(on bool) {
	p.mu.Lock()
	p.blackHole = on
	p.mu.Unlock()
}

// Refuse stops (on) or resumes (off) accepting connections, as a server
// that is down refuses them; connections open stay open (Reset closes
// them). Resuming listens on the same address again, and returns an error
// if that fails within a few seconds (another program took the port).
func (p *Proxy) Refuse(on bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if on {
		if p.l != nil {
			p.l.Close()
			p.l = nil
		}
		return nil
	}
	if p.l != nil {
		return nil
	}
	var l net.Listener
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; {
		if l, err = net.Listen("tcp", p.addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("faultnet: listening on %s again: %w", p.addr, err)
	}
	p.l = l
	p.wg.Add(1)
	go p.accept(l)
	return nil
}

// Hold makes every connection, open or new, hold what its client sends
// from its next chunk on, until Release.
func (p *Proxy) Hold() {
	p.mu.Lock()
	p.holdAll = true
	p.mu.Unlock()
}

// HoldNext makes the connection that carries the client's next chunk hold
// from that chunk on, until Release. It is HoldWhen with a match for any
// chunk.
func (p *Proxy) HoldNext() { p.HoldWhen(nil) }

// HoldWhen makes the first connection to carry a chunk from the client
// for which match reports true hold from that chunk on, until Release;
// chunks before it, and on other connections, pass. It is armed once: one
// connection holds. A nil match matches any chunk. match is called with
// the proxy's lock held and must not call the proxy.
func (p *Proxy) HoldWhen(match func(chunk []byte) bool) {
	p.mu.Lock()
	p.armed, p.match = true, match
	p.mu.Unlock()
}

// Release forwards, on each connection that holds, what it held, and
// stops holding; it also disarms HoldWhen and ends Hold.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdAll, p.armed, p.match = false, false, nil
	for c := range p.conns {
		if c.holding {
			c.holding = false
			c.pipes[Up].push(c.held, p.delay[Up])
			p.stats.Held -= len(c.held)
			c.held = nil
		}
	}
	p.notify()
}

// Reset closes every connection abruptly (a TCP reset, both sides) and
// returns once they are closed. What a connection held, or had read from
// its client and not yet forwarded, becomes a late batch for DeliverLate.
func (p *Proxy) Reset() {
	p.mu.Lock()
	conns := p.takeConns()
	p.mu.Unlock()
	for _, c := range conns {
		c.kill()
	}
	for _, c := range conns {
		<-c.finished
	}
	p.mu.Lock()
	p.stats.Resets += len(conns)
	p.notify()
	p.mu.Unlock()
}

// takeConns removes every open connection from the proxy and returns them.
// It requires that p.mu is held.
func (p *Proxy) takeConns() []*conn {
	out := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		c.dead = true
		out = append(out, c)
		delete(p.conns, c)
	}
	p.stats.Open = 0
	return out
}

// Stats returns the proxy's counts.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Wait blocks until cond reports true of the proxy's counts, and returns
// nil; or until ctx is done, and returns ctx.Err(). cond is called with the
// proxy's lock held and must not call the proxy.
func (p *Proxy) Wait(ctx context.Context, cond func(Stats) bool) error {
	for {
		p.mu.Lock()
		ok, changed := cond(p.stats), p.changed
		p.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// notify wakes the calls of Wait. It requires that p.mu is held.
func (p *Proxy) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// accept serves l until it is closed.
func (p *Proxy) accept(l net.Listener) {
	defer p.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		p.serve(c)
	}
}

// serve starts forwarding client, a connection just accepted.
func (p *Proxy) serve(client net.Conn) {
	p.mu.Lock()
	closed, hole := p.closed, p.blackHole
	p.mu.Unlock()
	if closed {
		abort(client)
		return
	}
	var server net.Conn
	if !hole {
		var err error
		if server, err = net.DialTimeout("tcp", p.target, dialTimeout); err != nil {
			abort(client) // the server is down: so is the proxy, to this client
			return
		}
	}
	c := newConn(p, client, server)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		abort(client)
		if server != nil {
			abort(server)
		}
		return
	}
	p.conns[c] = struct{}{}
	p.stats.Accepted++
	p.stats.Open++
	p.notify()
	p.mu.Unlock()
	c.start()
}

// abort closes c with a TCP reset rather than an orderly shutdown.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
