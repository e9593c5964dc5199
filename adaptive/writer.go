package adaptive

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

//go:generate go test -run ^TestGeneratedWritersAreCurrent$ -update

// statusWriter records the status a handler writes, for Handler's
// classifier. Unwrap lets http.ResponseController reach the methods of the
// writer underneath that no optional interface names (SetReadDeadline,
// SetWriteDeadline, EnableFullDuplex).
//
// A handler finds the optional interfaces of net/http by type assertion,
// so a wrapper that has them all lies about the writers that lack some,
// and one that has none hides them. newWriter therefore returns the
// statusWriter inside one of 64 types (writer_gen.go, written by
// internal/writergen), one for each set of the six optional interfaces
// (http.Flusher, http.Hijacker, io.ReaderFrom, io.StringWriter,
// http.Pusher, http.CloseNotifier), whose method set has exactly those of
// the writer it wraps. Each type is a struct of one pointer to the
// statusWriter, which an interface holds as it is: the statusWriter is the
// wrapper's one allocation.
//
// The types with Flush have FlushError too, which http.ResponseController's
// Flush calls in preference to Flush: without it, that Flush would call
// ours and return nil, and a handler would never learn that its client has
// gone. Ours returns what http.ResponseController's Flush returns on the
// writer underneath: its FlushError's error, or nil after its Flush.
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

// The optional interfaces' methods, which the types of writer_gen.go
// export only where the wrapped writer has them.

func (w *statusWriter) flush() {
	w.wrote()
	w.ResponseWriter.(http.Flusher).Flush()
}

func (w *statusWriter) flushError() error {
	w.wrote()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.ResponseWriter.(http.Hijacker).Hijack()
}

func (w *statusWriter) readFrom(r io.Reader) (int64, error) {
	w.wrote()
	return w.ResponseWriter.(io.ReaderFrom).ReadFrom(r)
}

func (w *statusWriter) writeString(s string) (int, error) {
	w.wrote()
	return w.ResponseWriter.(io.StringWriter).WriteString(s)
}

func (w *statusWriter) push(target string, opts *http.PushOptions) error {
	return w.ResponseWriter.(http.Pusher).Push(target, opts)
}

// closeNotifier is http.CloseNotifier, which is deprecated in favour of
// the request's context but which writers still have, and handlers may
// still use.
type closeNotifier interface{ CloseNotify() <-chan bool }

func (w *statusWriter) closeNotify() <-chan bool {
	return w.ResponseWriter.(closeNotifier).CloseNotify()
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
	if _, ok := w.(io.StringWriter); ok {
		set |= hasWriteString
	}
	if _, ok := w.(http.Pusher); ok {
		set |= hasPush
	}
	if _, ok := w.(closeNotifier); ok {
		set |= hasCloseNotify
	}
	sw := &statusWriter{ResponseWriter: w}
	return wrap(sw, set), sw
}
