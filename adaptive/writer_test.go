package adaptive_test

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptive/internal/writergen"
)

var update = flag.Bool("update", false, "rewrite the generated writer files")

// TestGeneratedWritersAreCurrent checks that writer_gen.go and
// writer_gen_test.go are what internal/writergen writes; with -update
// (go generate) it rewrites them.
func TestGeneratedWritersAreCurrent(t *testing.T) {
	for _, f := range []struct {
		file string
		gen  func() ([]byte, error)
	}{
		{"writer_gen.go", writergen.Writers},
		{"writer_gen_test.go", writergen.Tests},
	} {
		want, err := f.gen()
		require.NoError(t, err)
		if *update {
			require.NoError(t, os.WriteFile(f.file, want, 0o644))
			continue
		}
		got, err := os.ReadFile(f.file)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%s is stale: run go generate ./adaptive", f.file)
	}
}

// bareWriter is a writer with none of the optional interfaces, which the
// test writers of writer_gen_test.go embed; each of their methods records
// its name in called.
type bareWriter struct {
	http.ResponseWriter
	called string
}

// errFlush is what the test writers' FlushError returns.
var errFlush = errors.New("flush failed")

// optional names the exported optional interfaces of an
// http.ResponseWriter, and how a handler uses each.
var optional = []struct {
	name, letter string // the method, and the letter of the test writers' sets
	has          func(http.ResponseWriter) bool
	use          func(http.ResponseWriter)
}{
	{"Flush", "F", func(w http.ResponseWriter) bool { _, ok := w.(http.Flusher); return ok },
		func(w http.ResponseWriter) { w.(http.Flusher).Flush() }},
	{"Hijack", "H", func(w http.ResponseWriter) bool { _, ok := w.(http.Hijacker); return ok },
		func(w http.ResponseWriter) { _, _, _ = w.(http.Hijacker).Hijack() }},
	{"ReadFrom", "R", func(w http.ResponseWriter) bool { _, ok := w.(io.ReaderFrom); return ok },
		func(w http.ResponseWriter) { _, _ = w.(io.ReaderFrom).ReadFrom(strings.NewReader("x")) }},
	{"WriteString", "S", func(w http.ResponseWriter) bool { _, ok := w.(io.StringWriter); return ok },
		func(w http.ResponseWriter) { _, _ = io.WriteString(w, "x") }},
	{"Push", "P", func(w http.ResponseWriter) bool { _, ok := w.(http.Pusher); return ok },
		func(w http.ResponseWriter) { _ = w.(http.Pusher).Push("/x", nil) }},
	{"CloseNotify", "C", func(w http.ResponseWriter) bool { _, ok := w.(interface{ CloseNotify() <-chan bool }); return ok },
		func(w http.ResponseWriter) { w.(interface{ CloseNotify() <-chan bool }).CloseNotify() }},
}

// interfaces returns the names of the optional interfaces w has.
func interfaces(w http.ResponseWriter) []string {
	var names []string
	for _, o := range optional {
		if o.has(w) {
			names = append(names, o.name)
		}
	}
	return names
}

// TestHandlerWriterHasExactlyTheUnderlyingInterfaces gives Handler a writer
// with each of the 2⁷ sets of http.Flusher, http.Hijacker, io.ReaderFrom,
// io.StringWriter, http.Pusher, http.CloseNotifier and FlushError, and
// checks, for each exported interface, that the writer next receives
// passes the type assertion exactly when the underlying one does and that
// the call reaches it; and that http.ResponseController's Flush returns
// what it returns on the underlying writer and reaches the same method.
func TestHandlerWriterHasExactlyTheUnderlyingInterfaces(t *testing.T) {
	require.Len(t, testWriters, 1<<7)
	for _, tw := range testWriters {
		name := tw.set
		if name == "" {
			name = "none"
		}
		t.Run("writer="+name, func(t *testing.T) {
			lim := newLimiter(t, &recorder{}, 1, 10, 1)
			base := &bareWriter{ResponseWriter: httptest.NewRecorder()}
			under := tw.make(base)
			for _, o := range optional {
				require.Equal(t, strings.Contains(tw.set, o.letter), o.has(under), "the test's writer, %s", o.name)
			}
			wantErr := http.NewResponseController(under).Flush()
			wantCalled := base.called

			adaptive.Handler(lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for _, o := range optional {
					require.Equal(t, o.has(under), o.has(w), o.name)
					if o.has(w) {
						base.called = ""
						o.use(w)
						require.Equal(t, o.name, base.called, "the call does not reach the writer")
					}
				}
				base.called = ""
				require.Equal(t, wantErr, http.NewResponseController(w).Flush(), "http.ResponseController's Flush")
				require.Equal(t, wantCalled, base.called, "http.ResponseController's Flush")
			})).ServeHTTP(under, httptest.NewRequest("GET", "/", nil))
			require.Equal(t, uint64(1), lim.Stats().Succeeded)
		})
	}
}

func TestHandlerKeepsTheWriterInterfaces(t *testing.T) {
	lim := newLimiter(t, &recorder{}, 1, 10, 1)
	h := adaptive.Handler(lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "a")
		require.NoError(t, http.NewResponseController(w).Flush())
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.True(t, w.Flushed)
	require.Equal(t, "a", w.Body.String())
}

// TestHandlerWriterOverHTTP serves through Handler over HTTP/1.1 and
// HTTP/2: the writer next receives has the optional interfaces of net/http's
// own, and http.ResponseController reaches the methods no interface names
// (SetWriteDeadline, and EnableFullDuplex on HTTP/1.1) through Unwrap.
func TestHandlerWriterOverHTTP(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			lim := newLimiter(t, &recorder{}, 1, 10, 1)
			var raw, wrapped []string
			var deadlineErr, duplexErr error
			inner := adaptive.Handler(lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				wrapped = interfaces(w)
				rc := http.NewResponseController(w)
				deadlineErr = rc.SetWriteDeadline(time.Now().Add(time.Minute))
				if r.ProtoMajor == 1 {
					duplexErr = rc.EnableFullDuplex()
				}
				_, _ = io.WriteString(w, "ok")
			}))
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				raw = interfaces(w)
				inner.ServeHTTP(w, r)
			}))
			if proto == "HTTP/2.0" {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			resp, err := srv.Client().Get(srv.URL)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Equal(t, proto, resp.Proto)
			require.Equal(t, "ok", string(body))
			require.NotEmpty(t, raw)
			require.Equal(t, raw, wrapped)
			require.NoError(t, deadlineErr)
			require.NoError(t, duplexErr)
		})
	}
}

// TestHandlerFlushFailsOnceTheClientHasGone streams to a client over
// HTTP/1.1, which reads the first line and closes its connection; the
// handler then writes and flushes with http.ResponseController until a
// flush fails. Through Handler it must fail as it does on net/http's own
// writer, and not return nil for ever.
func TestHandlerFlushFailsOnceTheClientHasGone(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		t.Run(fmt.Sprintf("Handler=%t", wrapped), func(t *testing.T) {
			lim := newLimiter(t, &recorder{}, 1, 10, 1)
			gone, result := make(chan struct{}), make(chan error, 1)
			var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rc := http.NewResponseController(w)
				_, _ = io.WriteString(w, "first\n")
				if err := rc.Flush(); err != nil {
					result <- fmt.Errorf("the first flush failed: %w", err)
					return
				}
				<-gone
				// Generous: net/http's writer fails within milliseconds of
				// the reset that the closed connection answers writes with.
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
					_, _ = io.WriteString(w, strings.Repeat("x", 1023)+"\n")
					if err := rc.Flush(); err != nil {
						result <- nil
						return
					}
					time.Sleep(time.Millisecond)
				}
				result <- errors.New("every flush returned nil for 10 s after the client left")
			})
			if wrapped {
				h = adaptive.Handler(lim, h)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			require.NoError(t, err)
			_, err = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			require.NoError(t, err)
			br := bufio.NewReader(conn)
			for {
				line, err := br.ReadString('\n')
				require.NoError(t, err)
				if strings.HasPrefix(line, "first") {
					break
				}
			}
			require.NoError(t, conn.Close())
			close(gone)
			require.NoError(t, <-result)
		})
	}
}
