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
// and one that has none hides them; wrap returns statusWriter inside a
// struct whose method set has exactly the optional interfaces of the
// writer it wraps.
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

// The optional interfaces, each implemented by statusWriter only for the
// struct of wrap that exposes it, and only when the writer it wraps has it.

func (w *statusWriter) Flush() {
	w.wrote()
	w.ResponseWriter.(http.Flusher).Flush()
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.ResponseWriter.(http.Hijacker).Hijack()
}

func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	w.wrote()
	return w.ResponseWriter.(io.ReaderFrom).ReadFrom(r)
}

func (w *statusWriter) Push(target string, opts *http.PushOptions) error {
	return w.ResponseWriter.(http.Pusher).Push(target, opts)
}

// The method sets wrap chooses from: the writer's own and Unwrap, plus one
// of the optional interfaces each.
type (
	rw interface {
		http.ResponseWriter
		Unwrap() http.ResponseWriter
	}
	flusher    = http.Flusher
	hijacker   = http.Hijacker
	readerFrom = io.ReaderFrom
	pusher     = http.Pusher
)

// wrap returns w as a writer with exactly the optional interfaces of the
// writer it wraps.
func (w *statusWriter) wrap() http.ResponseWriter {
	_, f := w.ResponseWriter.(http.Flusher)
	_, h := w.ResponseWriter.(http.Hijacker)
	_, r := w.ResponseWriter.(io.ReaderFrom)
	_, p := w.ResponseWriter.(http.Pusher)
	switch {
	case f && h && r && p:
		return struct {
			rw
			flusher
			hijacker
			readerFrom
			pusher
		}{w, w, w, w, w}
	case f && h && r:
		return struct {
			rw
			flusher
			hijacker
			readerFrom
		}{w, w, w, w}
	case f && h && p:
		return struct {
			rw
			flusher
			hijacker
			pusher
		}{w, w, w, w}
	case f && r && p:
		return struct {
			rw
			flusher
			readerFrom
			pusher
		}{w, w, w, w}
	case h && r && p:
		return struct {
			rw
			hijacker
			readerFrom
			pusher
		}{w, w, w, w}
	case f && h:
		return struct {
			rw
			flusher
			hijacker
		}{w, w, w}
	case f && r:
		return struct {
			rw
			flusher
			readerFrom
		}{w, w, w}
	case f && p:
		return struct {
			rw
			flusher
			pusher
		}{w, w, w}
	case h && r:
		return struct {
			rw
			hijacker
			readerFrom
		}{w, w, w}
	case h && p:
		return struct {
			rw
			hijacker
			pusher
		}{w, w, w}
	case r && p:
		return struct {
			rw
			readerFrom
			pusher
		}{w, w, w}
	case f:
		return struct {
			rw
			flusher
		}{w, w}
	case h:
		return struct {
			rw
			hijacker
		}{w, w}
	case r:
		return struct {
			rw
			readerFrom
		}{w, w}
	case p:
		return struct {
			rw
			pusher
		}{w, w}
	}
	return struct{ rw }{w}
}
