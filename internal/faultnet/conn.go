package faultnet

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// readSize is the most one read from either side returns: one chunk.
const readSize = 32 << 10

// conn is one client connection and the proxy's connection to the server
// for it. Each direction is a pipe: a goroutine reads chunks and disposes
// of them under the proxy's lock (forward, hold or drop), and another
// writes the forwarded ones in order, each once it is due. The connection
// ends when both directions have ended (an orderly shutdown on each side
// is passed on to the other), when either side fails, or when the proxy
// kills it; what it held, or had read from the client and not yet
// written, then becomes a late batch (see finish).
type conn struct {
	p      *Proxy
	client net.Conn
	server net.Conn // nil for a connection accepted while a black hole
	stream Stream   // the protocol's view of what the server received
	pipes  [2]*pipe // by Dir; nil without a server

	killOnce sync.Once
	killed   chan struct{} // closed by kill
	finished chan struct{} // closed by finish

	// The fields below are guarded by p.mu.
	dead    bool   // removed from the proxy's connections
	holding bool   // what the client sends is held
	held    []byte // what it held
}

// A pipe is one direction of a conn.
type pipe struct {
	c        *conn
	dir      Dir
	src, dst net.Conn
	wake     chan struct{} // signalled when queue grows or eof is set

	// The fields below are guarded by the proxy's mu.
	queue   []chunk // read, to be written
	current []byte  // the chunk being written, until it is
	eof     bool    // src has closed its side
}

// A chunk is what one read returned, and when to write it.
type chunk struct {
	b       []byte
	due     time.Time
	delayed bool
}

func newConn(p *Proxy, client, server net.Conn) *conn {
	c := &conn{
		p: p, client: client, server: server, stream: p.proto.Start(),
		killed: make(chan struct{}), finished: make(chan struct{}),
	}
	if server != nil {
		c.pipes[Up] = &pipe{c: c, dir: Up, src: client, dst: server, wake: make(chan struct{}, 1)}
		c.pipes[Down] = &pipe{c: c, dir: Down, src: server, dst: client, wake: make(chan struct{}, 1)}
	}
	return c
}

// start runs the connection's goroutines, and finishes it once they end.
func (c *conn) start() {
	var wg sync.WaitGroup
	run := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	if c.server == nil {
		run(c.swallow)
	} else {
		for _, pp := range c.pipes {
			run(pp.read)
			run(pp.write)
		}
	}
	c.p.wg.Add(1)
	go func() {
		defer c.p.wg.Done()
		wg.Wait()
		c.client.Close()
		if c.server != nil {
			c.server.Close()
		}
		c.p.finish(c)
	}()
}

// kill closes both sides of the connection abruptly, which ends its
// goroutines.
func (c *conn) kill() {
	c.killOnce.Do(func() {
		close(c.killed)
		abort(c.client)
		if c.server != nil {
			abort(c.server)
		}
	})
}

// swallow reads what the client of a black-holed connection sends and
// discards it, until the client or the proxy closes the connection.
func (c *conn) swallow() {
	buf := make([]byte, readSize)
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			c.p.mu.Lock()
			c.p.stats.Dropped += int64(n)
			c.p.notify()
			c.p.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// read reads chunks from the pipe's source until it closes or fails, and
// hands each to the proxy (see took).
func (pp *pipe) read() {
	buf := make([]byte, readSize)
	for {
		n, err := pp.src.Read(buf)
		if n > 0 {
			pp.c.p.took(pp, buf[:n])
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				pp.c.kill()
				return
			}
			p := pp.c.p
			p.mu.Lock()
			pp.eof = true
			p.mu.Unlock()
			pp.signal()
			return
		}
	}
}

// write writes the pipe's chunks to its destination, each once it is due,
// until the source has closed and everything read is written (then it
// shuts the destination's writing side) or the connection is killed.
func (pp *pipe) write() {
	p := pp.c.p
	for {
		p.mu.Lock()
		for len(pp.queue) == 0 {
			if pp.eof && !(pp.dir == Up && pp.c.holding) {
				p.mu.Unlock()
				if tc, ok := pp.dst.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
				return
			}
			p.mu.Unlock()
			select {
			case <-pp.wake:
			case <-pp.c.killed:
				return
			}
			p.mu.Lock()
		}
		ch := pp.queue[0]
		pp.queue = pp.queue[1:]
		pp.current = ch.b
		p.mu.Unlock()

		if wait := time.Until(ch.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-pp.c.killed:
				t.Stop()
				return
			}
		}
		if _, err := pp.dst.Write(ch.b); err != nil {
			pp.c.kill()
			return
		}
		p.mu.Lock()
		pp.current = nil
		p.stats.Queued[pp.dir] -= len(ch.b)
		p.stats.Forwarded[pp.dir] += int64(len(ch.b))
		if ch.delayed {
			p.stats.Delayed++
		}
		if pp.dir == Up {
			pp.c.stream.Sent(ch.b)
		}
		p.notify()
		p.mu.Unlock()
	}
}

// push queues b to be written after delay d. It requires that the
// proxy's mu is held.
func (pp *pipe) push(b []byte, d time.Duration) {
	if len(b) == 0 {
		return
	}
	pp.queue = append(pp.queue, chunk{b: b, due: time.Now().Add(d), delayed: d > 0})
	pp.c.p.stats.Queued[pp.dir] += len(b)
	pp.signal()
}

// signal wakes the pipe's writer.
func (pp *pipe) signal() {
	select {
	case pp.wake <- struct{}{}:
	default:
	}
}

// unsent returns the bytes the pipe read and did not write, in order. It
// requires that the proxy's mu is held and the pipe's goroutines have
// ended.
func (pp *pipe) unsent() []byte {
	if pp == nil {
		return nil
	}
	var out []byte
	out = append(out, pp.current...)
	for _, ch := range pp.queue {
		out = append(out, ch.b...)
	}
	pp.current, pp.queue = nil, nil
	return out
}

// took disposes of b, a chunk that pp read: it drops it, holds it or
// queues it to be written, as the proxy's faults say now.
func (p *Proxy) took(pp *pipe, b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := pp.c
	if c.dead {
		return
	}
	switch {
	case p.drop[pp.dir] || p.blackHole:
		p.stats.Dropped += int64(len(b))
	case pp.dir == Up && p.holds(c, b):
		c.held = append(c.held, b...)
		p.stats.Held += len(b)
	default:
		pp.push(append([]byte(nil), b...), p.delay[pp.dir])
	}
	p.notify()
}

// holds reports whether c holds the client's chunk b, and starts c
// holding if Hold or an armed HoldWhen says it must. It requires that
// p.mu is held.
func (p *Proxy) holds(c *conn, b []byte) bool {
	switch {
	case c.holding:
		return true
	case p.holdAll:
	case p.armed && (p.match == nil || p.match(b)):
		p.armed, p.match = false, nil
	default:
		return false
	}
	c.holding = true
	p.stats.Holds++
	return true
}

// finish accounts for c once its goroutines have ended: it is no longer
// open, and what it held, or had read from the client and not written,
// becomes a late batch unless the proxy is closed.
func (p *Proxy) finish(c *conn) {
	p.mu.Lock()
	defer func() {
		p.notify()
		p.mu.Unlock()
		close(c.finished)
	}()
	if _, ok := p.conns[c]; ok {
		delete(p.conns, c)
		p.stats.Open--
	}
	c.dead = true
	p.stats.Held -= len(c.held)
	var b []byte
	for _, pp := range c.pipes {
		if pp != nil {
			unsent := pp.unsent()
			p.stats.Queued[pp.dir] -= len(unsent)
			if pp.dir == Up {
				b = append(unsent, c.held...)
			}
		}
	}
	c.held, c.holding = nil, false
	if p.closed || c.server == nil || len(b) == 0 {
		return
	}
	replay, answered := c.stream.Late(b)
	if replay == nil {
		p.stats.Lost++
		return
	}
	p.late = append(p.late, &lateBatch{replay: replay, answered: answered})
	p.stats.Late = len(p.late)
}
