package faultnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// A lateBatch is what a connection held when it ended, ready to deliver
// on a fresh connection: the bytes to write, and the protocol's test of
// the server's answer (nil if it has none).
type lateBatch struct {
	replay   []byte
	answered func(fromServer []byte) bool
}

// DeliverLate delivers the late batches, oldest first, each on a fresh
// connection to the server, as requests that reached the server after
// their client gave up on them. Where the protocol can tell (see
// Protocol), it returns once the server has answered every request of
// every batch, and closes those connections; otherwise it returns once
// the bytes are written, and the connection stays open, its answers
// discarded, until the server closes it or the proxy is closed. It
// returns the number of batches delivered.
//
// If a batch cannot be delivered (the server is down, or closes the
// connection before it has answered), DeliverLate returns an error and
// keeps that batch and the ones after it for a later call; if ctx ends
// first, it returns ctx.Err() and keeps them too.
func (p *Proxy) DeliverLate(ctx context.Context) (int, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return 0, ErrClosed
	}
	batches := p.late
	p.late = nil
	p.stats.Late = 0
	p.mu.Unlock()
	for i, b := range batches {
		if err := p.deliver(ctx, b); err != nil {
			p.mu.Lock()
			if !p.closed {
				p.late = append(batches[i:len(batches):len(batches)], p.late...)
				p.stats.Late = len(p.late)
			}
			p.notify()
			p.mu.Unlock()
			return i, err
		}
		p.mu.Lock()
		p.stats.Delivered++
		p.notify()
		p.mu.Unlock()
	}
	return len(batches), nil
}

// DiscardLate drops the late batches, as a network that loses them, and
// returns how many it dropped.
func (p *Proxy) DiscardLate() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.late)
	p.late = nil
	p.stats.Late = 0
	p.stats.Lost += n
	p.notify()
	return n
}

// deliver writes b on a fresh connection to the server, and waits for
// the answers if b can tell them.
func (p *Proxy) deliver(ctx context.Context, b *lateBatch) error {
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp", p.target)
	if err != nil {
		return fmt.Errorf("faultnet: delivering late: %w", err)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		abort(c)
		return ErrClosed
	}
	p.lateConns[c] = struct{}{}
	p.mu.Unlock()
	done := func() {
		p.mu.Lock()
		delete(p.lateConns, c)
		p.mu.Unlock()
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.Write(b.replay); err != nil {
		done()
		abort(c)
		return p.deliveryError(ctx, err)
	}
	if b.answered == nil {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			buf := make([]byte, readSize)
			for {
				if _, err := c.Read(buf); err != nil {
					break
				}
			}
			done()
			c.Close()
		}()
		return nil
	}
	defer func() {
		done()
		c.Close()
	}()
	if b.answered(nil) {
		return nil
	}
	buf := make([]byte, readSize)
	for {
		n, err := c.Read(buf)
		if n > 0 && b.answered(buf[:n]) {
			return nil
		}
		if err != nil {
			return p.deliveryError(ctx, err)
		}
	}
}

// deliveryError is the error of a delivery whose connection failed with
// err: ctx.Err() if ctx ended it, ErrClosed if the proxy did.
func (p *Proxy) deliveryError(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return ErrClosed
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("faultnet: delivering late: %w", err)
	}
	return fmt.Errorf("faultnet: delivering late: the server closed the connection before answering: %w", err)
}
