package faultnet

// A Protocol is what a proxy knows of the byte stream it carries: enough
// to deliver what a connection held on a fresh connection of its own (see
// DeliverLate). Raw and HTTP2 are the two it provides.
type Protocol interface {
	// Start returns the state of a new connection's stream from its
	// client.
	Start() Stream
}

// A Stream follows what one client connection sends. The proxy calls its
// methods one at a time.
type Stream interface {
	// Sent is called with the bytes forwarded to the server, in order.
	Sent(b []byte)
	// Late returns what a fresh connection must carry for the server to
	// read held, the bytes the client sent after those passed to Sent, as
	// it would have read them on the original connection, without a
	// request it already received: the bytes to write, or nil if held
	// cannot be delivered on a connection of its own; and answered, fed in
	// order with what the server sends on that connection (first with
	// nil), which reports true once the server has answered every request
	// that held completes, or nil if the protocol cannot tell.
	Late(held []byte) (replay []byte, answered func(fromServer []byte) bool)
}

// Raw is the Protocol of a stream whose requests need nothing of the
// connection before them, such as Redis's without authentication: a late
// batch is the held bytes alone, and the proxy cannot tell when they are
// answered.
var Raw Protocol = raw{}

type raw struct{}

func (raw) Start() Stream { return raw{} }
func (raw) Sent(b []byte) {}
func (raw) Late(held []byte) ([]byte, func([]byte) bool) {
	return append([]byte(nil), held...), nil
}
