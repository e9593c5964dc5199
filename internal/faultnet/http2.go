package faultnet

import (
	"bytes"
	"encoding/binary"
)

// HTTP2 is the Protocol of a cleartext HTTP/2 connection from a client,
// as gRPC makes.
//
// A server reads a late batch on a connection of its own, so that
// connection must open as the original did: the connection preface, the
// client's settings, and every header block sent before the batch, since
// HPACK compresses each header block against the ones before it on the
// same connection (a block that refers to an entry the server has not
// seen is a connection error). The batch must not repeat a request the
// server already received, either: that would be a duplicate, which no
// network makes. So a late connection carries the preface and every frame
// the original carried before the batch except DATA, the payload of
// requests: each stream that the client had ended (END_STREAM, or its own
// RST_STREAM) is reset (RST_STREAM, CANCEL) right after its header block,
// so the server drops it without running it, and a stream still open
// takes only what the batch sends on it. WINDOW_UPDATE and PING frames,
// which concern the original server's data and liveness, are left out
// too. Then comes the batch as the client sent it.
//
// A request is answered when the server ends its stream (END_STREAM or
// RST_STREAM), or refuses it with a GOAWAY whose last stream is lower; a
// late batch is answered when every stream the client ended in it is.
//
// A request without a body (a HEADERS frame that ends its stream) may
// run again: a server can start a request on its header block, before the
// reset that follows it arrives. gRPC sends every request with a body,
// and a gRPC server runs a call only once it has the request's message.
//
// A request that straddles the batch, its DATA partly forwarded before
// the hold, reaches the server without the forwarded part, and fails
// there: the late connection loses it rather than repeat part of it. A
// connection whose frames kept pass maxKept bytes is not replayed (its
// batch is counted in Stats.Lost).
var HTTP2 Protocol = h2{}

// The parts of HTTP/2 (RFC 9113) the proxy reads: the frame header is 9
// bytes, a 24-bit length, a type, flags and a 31-bit stream identifier.
const (
	h2HeaderLen = 9

	h2Data         = 0x0
	h2Headers      = 0x1
	h2RSTStream    = 0x3
	h2Ping         = 0x6
	h2GoAway       = 0x7
	h2WindowUpdate = 0x8
	h2Continuation = 0x9

	h2EndStream  = 0x1
	h2EndHeaders = 0x4

	h2Cancel = 0x8 // RST_STREAM's error code CANCEL

	// maxKept bounds what a connection keeps for a late delivery.
	maxKept = 8 << 20
)

// h2Preface is what an HTTP/2 client sends first.
var h2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

type h2 struct{}

func (h2) Start() Stream { return &h2Stream{} }

// h2Stream is what an HTTP/2 client connection has forwarded, kept for a
// late connection.
type h2Stream struct {
	started    bool   // the preface has been forwarded
	bad        bool   // not HTTP/2, or more to keep than maxKept
	partial    []byte // the start of a frame forwarded, short of the whole
	kept       []byte // what a late connection carries before its batch
	resetAfter uint32 // a stream to reset once its header block ends (0: none)
}

func (s *h2Stream) Sent(b []byte) {
	if s.bad {
		return
	}
	s.partial = append(s.partial, b...)
	if !s.started {
		if len(s.partial) < len(h2Preface) {
			s.bad = !bytes.HasPrefix(h2Preface, s.partial)
			return
		}
		if !bytes.HasPrefix(s.partial, h2Preface) {
			s.bad = true
			return
		}
		s.kept = append(s.kept, h2Preface...)
		s.partial = s.partial[len(h2Preface):]
		s.started = true
	}
	rest := s.partial
	for {
		f, r, ok := h2Frame(rest)
		if !ok {
			break
		}
		s.keep(f)
		rest = r
	}
	s.partial = append([]byte(nil), rest...)
	if len(s.kept) > maxKept {
		s.bad, s.kept = true, nil
	}
}

// keep appends to s.kept what a late connection carries of f, a frame
// the server received.
func (s *h2Stream) keep(f []byte) {
	typ, flags, id := f[3], f[4], h2StreamID(f)
	switch typ {
	case h2Data:
		if flags&h2EndStream != 0 {
			s.kept = h2AppendReset(s.kept, id)
		}
	case h2Headers:
		if flags&h2EndStream == 0 {
			s.kept = append(s.kept, f...)
			return
		}
		start := len(s.kept)
		s.kept = append(s.kept, f...)
		s.kept[start+4] &^= h2EndStream
		if flags&h2EndHeaders != 0 {
			s.kept = h2AppendReset(s.kept, id)
		} else {
			s.resetAfter = id // a reset must not split a header block
		}
	case h2Continuation:
		s.kept = append(s.kept, f...)
		if flags&h2EndHeaders != 0 && s.resetAfter != 0 {
			s.kept = h2AppendReset(s.kept, s.resetAfter)
			s.resetAfter = 0
		}
	case h2WindowUpdate, h2Ping:
	default:
		s.kept = append(s.kept, f...)
	}
}

func (s *h2Stream) Late(held []byte) ([]byte, func([]byte) bool) {
	if s.bad {
		return nil, nil
	}
	batch := append(append([]byte(nil), s.partial...), held...)
	var replay, frames []byte
	if s.started {
		replay = append(append([]byte(nil), s.kept...), batch...)
		frames = batch
	} else {
		// Nothing was forwarded: the batch is the whole connection.
		if !bytes.HasPrefix(batch, h2Preface) {
			return nil, nil
		}
		replay, frames = batch, batch[len(h2Preface):]
	}
	pending := make(map[uint32]bool)
	for {
		f, rest, ok := h2Frame(frames)
		if !ok {
			break
		}
		switch typ, flags, id := f[3], f[4], h2StreamID(f); {
		case (typ == h2Data || typ == h2Headers) && flags&h2EndStream != 0:
			pending[id] = true
		case typ == h2RSTStream:
			delete(pending, id)
		}
		frames = rest
	}
	a := &h2Answers{pending: pending}
	return replay, a.feed
}

// h2Answers follows what a server sends on a late connection, for the
// streams that wait for its answer.
type h2Answers struct {
	pending map[uint32]bool
	partial []byte
}

// feed takes the next bytes from the server and reports whether every
// pending stream is answered.
func (a *h2Answers) feed(b []byte) bool {
	a.partial = append(a.partial, b...)
	rest := a.partial
	for {
		f, r, ok := h2Frame(rest)
		if !ok {
			break
		}
		switch typ, flags, id := f[3], f[4], h2StreamID(f); {
		case (typ == h2Data || typ == h2Headers) && flags&h2EndStream != 0, typ == h2RSTStream:
			delete(a.pending, id)
		case typ == h2GoAway && len(f) >= h2HeaderLen+4:
			last := binary.BigEndian.Uint32(f[h2HeaderLen:]) & 0x7fffffff
			for id := range a.pending {
				if id > last {
					delete(a.pending, id) // refused: the server will not run it
				}
			}
		}
		rest = r
	}
	a.partial = append(a.partial[:0], rest...)
	return len(a.pending) == 0
}

// h2Frame splits the first whole frame off b, and reports whether b holds
// one.
func h2Frame(b []byte) (frame, rest []byte, ok bool) {
	if len(b) < h2HeaderLen {
		return nil, b, false
	}
	n := h2HeaderLen + (int(b[0])<<16 | int(b[1])<<8 | int(b[2]))
	if len(b) < n {
		return nil, b, false
	}
	return b[:n], b[n:], true
}

// h2StreamID returns the stream identifier of frame f.
func h2StreamID(f []byte) uint32 {
	return binary.BigEndian.Uint32(f[5:h2HeaderLen]) & 0x7fffffff
}

// h2AppendReset appends to b a RST_STREAM frame that cancels stream id.
func h2AppendReset(b []byte, id uint32) []byte {
	b = append(b, 0, 0, 4, h2RSTStream, 0)
	b = binary.BigEndian.AppendUint32(b, id)
	return binary.BigEndian.AppendUint32(b, h2Cancel)
}
