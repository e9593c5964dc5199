package adaptive

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// statusWriter records the status a handler writes, for Handler's
// classifier. Unwrap lets http.ResponseController reach the writer's other
// interfaces.
//
// A handler finds the optional interfaces of net/http by type assertion,
// so a wrapper that has them all lies about the writers that lack some,
// and one that has none hides them. newWriter therefore returns statusWriter
// inside one of sixteen types, one for each set of the four optional
// interfaces (http.Flusher, http.Hijacker, io.ReaderFrom, http.Pusher),
// whose method set has exactly those of the writer it wraps; each embeds
// statusWriter, so that the wrapper is one allocation.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote()
	return w.ResponseWriter.Write(b)
}

// wrote records the implicit 200 of a body written, or headers flushed,
// before any status.
func (w *statusWriter) wrote() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// The optional interfaces' methods, which the types below export only
// where the wrapped writer has them.

func (w *statusWriter) flush() {
	w.wrote()
	w.ResponseWriter.(http.Flusher).Flush()
}

func (w *statusWriter) hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.ResponseWriter.(http.Hijacker).Hijack()
}

func (w *statusWriter) readFrom(r io.Reader) (int64, error) {
	w.wrote()
	return w.ResponseWriter.(io.ReaderFrom).ReadFrom(r)
}

func (w *statusWriter) push(target string, opts *http.PushOptions) error {
	return w.ResponseWriter.(http.Pusher).Push(target, opts)
}

// newWriter returns a writer for next that wraps w with exactly w's
// optional interfaces, and the statusWriter inside it.
func newWriter(w http.ResponseWriter) (http.ResponseWriter, *statusWriter) {
	var set uint8
	if _, ok := w.(http.Flusher); ok {
		set |= hasFlush
	}
	if _, ok := w.(http.Hijacker); ok {
		set |= hasHijack
	}
	if _, ok := w.(io.ReaderFrom); ok {
		set |= hasReadFrom
	}
	if _, ok := w.(http.Pusher); ok {
		set |= hasPush
	}
	sw := statusWriter{ResponseWriter: w}
	switch set {
	case hasFlush | hasHijack | hasReadFrom | hasPush:
		x := &writerFHRP{sw}
		return x, &x.statusWriter
	case hasFlush | hasHijack | hasReadFrom:
		x := &writerFHR{sw}
		return x, &x.statusWriter
	case hasFlush | hasHijack | hasPush:
		x := &writerFHP{sw}
		return x, &x.statusWriter
	case hasFlush | hasReadFrom | hasPush:
		x := &writerFRP{sw}
		return x, &x.statusWriter
	case hasHijack | hasReadFrom | hasPush:
		x := &writerHRP{sw}
		return x, &x.statusWriter
	case hasFlush | hasHijack:
		x := &writerFH{sw}
		return x, &x.statusWriter
	case hasFlush | hasReadFrom:
		x := &writerFR{sw}
		return x, &x.statusWriter
	case hasFlush | hasPush:
		x := &writerFP{sw}
		return x, &x.statusWriter
	case hasHijack | hasReadFrom:
		x := &writerHR{sw}
		return x, &x.statusWriter
	case hasHijack | hasPush:
		x := &writerHP{sw}
		return x, &x.statusWriter
	case hasReadFrom | hasPush:
		x := &writerRP{sw}
		return x, &x.statusWriter
	case hasFlush:
		x := &writerF{sw}
		return x, &x.statusWriter
	case hasHijack:
		x := &writerH{sw}
		return x, &x.statusWriter
	case hasReadFrom:
		x := &writerR{sw}
		return x, &x.statusWriter
	case hasPush:
		x := &writerP{sw}
		return x, &x.statusWriter
	}
	x := &writer{sw}
	return x, &x.statusWriter
}

// The optional interfaces, as bits of newWriter's set.
const (
	hasFlush uint8 = 1 << iota
	hasHijack
	hasReadFrom
	hasPush
)

// writer and writerX, for X the initials of the optional interfaces it
// has (F Flusher, H Hijacker, R ReaderFrom, P Pusher), are statusWriter
// with those interfaces.
type (
	writerFHRP struct{ statusWriter }
	writerFHR  struct{ statusWriter }
	writerFHP  struct{ statusWriter }
	writerFRP  struct{ statusWriter }
	writerHRP  struct{ statusWriter }
	writerFH   struct{ statusWriter }
	writerFR   struct{ statusWriter }
	writerFP   struct{ statusWriter }
	writerHR   struct{ statusWriter }
	writerHP   struct{ statusWriter }
	writerRP   struct{ statusWriter }
	writerF    struct{ statusWriter }
	writerH    struct{ statusWriter }
	writerR    struct{ statusWriter }
	writerP    struct{ statusWriter }
	writer     struct{ statusWriter }
)

func (w *writerFHRP) Flush()                                           { w.flush() }
func (w *writerFHRP) Hijack() (net.Conn, *bufio.ReadWriter, error)     { return w.hijack() }
func (w *writerFHRP) ReadFrom(r io.Reader) (int64, error)              { return w.readFrom(r) }
func (w *writerFHRP) Push(target string, opts *http.PushOptions) error { return w.push(target, opts) }

func (w *writerFHR) Flush()                                       { w.flush() }
func (w *writerFHR) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.hijack() }
func (w *writerFHR) ReadFrom(r io.Reader) (int64, error)          { return w.readFrom(r) }

func (w *writerFHP) Flush()                                           { w.flush() }
func (w *writerFHP) Hijack() (net.Conn, *bufio.ReadWriter, error)     { return w.hijack() }
func (w *writerFHP) Push(target string, opts *http.PushOptions) error { return w.push(target, opts) }

func (w *writerFRP) Flush()                                           { w.flush() }
func (w *writerFRP) ReadFrom(r io.Reader) (int64, error)              { return w.readFrom(r) }
func (w *writerFRP) Push(target string, opts *http.PushOptions) error { return w.push(target, opts) }

func (w *writerHRP) Hijack() (net.Conn, *bufio.ReadWriter, error)     { return w.hijack() }
func (w *writerHRP) ReadFrom(r io.Reader) (int64, error)              { return w.readFrom(r) }
func (w *writerHRP) Push(target string, opts *http.PushOptions) error { return w.push(target, opts) }

func (w *writerFH) Flush()                                       { w.flush() }
func (w *writerFH) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.hijack() }

func (w *writerFR) Flush()                              { w.flush() }
func (w *writerFR) ReadFrom(r io.Reader) (int64, error) { return w.readFrom(r) }

func (w *writerFP) Flush()                                           { w.flush() }
func (w *writerFP) Push(target string, opts *http.PushOptions) error { return w.push(target, opts) }

func (w *writerHR) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.hijack() }
func (w *writerHR) ReadFrom(r io.Reader) (int64, error)          { return w.readFrom(r) }

func (w *writerHP) Hijack() (net.Conn, *bufio.ReadWriter, error)     { return w.hijack() }
func (w *writerHP) Push(target string, opts *http.PushOptions) error { return w.push(target, opts) }

func (w *writerRP) ReadFrom(r io.Reader) (int64, error)              { return w.readFrom(r) }
func (w *writerRP) Push(target string, opts *http.PushOptions) error { return w.push(target, opts) }

func (w *writerF) Flush() { w.flush() }

func (w *writerH) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.hijack() }

func (w *writerR) ReadFrom(r io.Reader) (int64, error) { return w.readFrom(r) }

func (w *writerP) Push(target string, opts *http.PushOptions) error { return w.push(target, opts) }
