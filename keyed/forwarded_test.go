package keyed_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/keyed"
)

// The trusted field's lines are one list, and the key is the address in
// its last element: the one the trusted proxy added, whichever form it
// used. Each case sends one request from the proxy's address 10.0.0.1 at a
// rate of 0 and a burst of 1, and checks which key was charged.
func TestTrustedHeaderTakesTheLastElementOfTheCombinedList(t *testing.T) {
	const proxy = "10.0.0.1"
	tests := []struct {
		name   string
		field  string
		lines  []string
		charge string // the key charged
	}{
		{"one line, appended", "X-Forwarded-For", []string{"203.0.113.9, 198.51.100.1"}, "198.51.100.1"},
		{"a line of the proxy's own", "X-Forwarded-For", []string{"203.0.113.9", "198.51.100.1"}, "198.51.100.1"},
		{"both forms", "X-Forwarded-For", []string{"203.0.113.9, 203.0.113.10", "198.51.100.1"}, "198.51.100.1"},
		{"empty elements skipped", "X-Forwarded-For", []string{"203.0.113.9", "198.51.100.1, ,"}, "198.51.100.1"},
		{"an empty last line", "X-Forwarded-For", []string{"198.51.100.1", ""}, "198.51.100.1"},
		{"IPv4 with a port", "x-forwarded-for", []string{"203.0.113.9", "198.51.100.1:4711"}, "198.51.100.1"},
		{"IPv6 in brackets with a port", "X-Forwarded-For", []string{"203.0.113.9", "[2001:db8::1]:8443"}, "2001:db8::1"},
		{"IPv6 bare", "X-Forwarded-For", []string{"203.0.113.9, 2001:db8::2"}, "2001:db8::2"},
		{"IPv4 mapped", "X-Forwarded-For", []string{"::ffff:198.51.100.3"}, "198.51.100.3"},
		{"not an address", "X-Forwarded-For", []string{"203.0.113.9", "unknown"}, proxy},
		{"a Forwarded element in X-Forwarded-For", "X-Forwarded-For", []string{"for=198.51.100.1"}, proxy},
		{"Forwarded", "Forwarded", []string{"for=192.0.2.60;proto=http;by=203.0.113.43"}, "192.0.2.60"},
		{"Forwarded, repeated lines", "Forwarded", []string{"for=203.0.113.9", "for=192.0.2.61"}, "192.0.2.61"},
		{"Forwarded, quoted IPv6 with a port", "forwarded", []string{`for=203.0.113.9, For="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17"},
		{"Forwarded, for not first", "Forwarded", []string{`for="203.0.113.9";proto=https, proto=http;for=192.0.2.62`}, "192.0.2.62"},
		{"Forwarded, a comma in a quoted value", "Forwarded", []string{`for=203.0.113.9, for=192.0.2.67;ext="a,b"`}, "192.0.2.67"},
		{"Forwarded, an escaped quote", "Forwarded", []string{`for=203.0.113.9, for=192.0.2.68;ext="a\",b"`}, "192.0.2.68"},
		{"Forwarded, obfuscated", "Forwarded", []string{"for=192.0.2.63, for=_hidden"}, proxy},
		{"Forwarded, unknown", "Forwarded", []string{"for=192.0.2.64, for=unknown"}, proxy},
		{"Forwarded, no for", "Forwarded", []string{"for=192.0.2.65, by=203.0.113.43"}, proxy},
		{"Forwarded trusted, only X-Forwarded-For sent", "Forwarded", nil, proxy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := keyed.MustNewLimiter(0, 1)
			h := keyed.Middleware(l, keyed.WithTrustedHeader(tt.field))(ok200)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = proxy + ":1234"
			r.Header["X-Forwarded-For"] = []string{"203.0.113.200"} // another field, never the key
			for _, v := range tt.lines {
				r.Header.Add(tt.field, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, http.StatusOK, w.Code)
			bal, present := l.Balance(tt.charge)
			require.True(t, present, "no entry for %s", tt.charge)
			require.Zero(t, bal, "%s was not charged", tt.charge)
			require.Equal(t, 1, l.Len(), "more than one key charged")
		})
	}
}

// On the wire: a proxy that adds a line of its own (HAProxy's option
// forwardfor does) behind a client that sends the field itself. Each
// request names a new client address in its own line, as a client picking
// its key would, and the proxy's line always names the address it saw: at
// a rate of 0 and a burst of 1 only the first request gets through.
func TestTrustedHeaderOnTheWireChargesTheAddressTheProxySaw(t *testing.T) {
	l := keyed.MustNewLimiter(0, 1)
	srv := httptest.NewServer(keyed.Middleware(l, keyed.WithTrustedHeader("X-Forwarded-For"))(ok200))
	defer srv.Close()
	var codes []int
	for i := range 3 {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		req := fmt.Sprintf("GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.%d\r\nX-Forwarded-For: 198.51.100.1\r\nConnection: close\r\n\r\n", 10+i)
		_, err = conn.Write([]byte(req))
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		resp.Body.Close()
		conn.Close()
		codes = append(codes, resp.StatusCode)
	}
	require.Equal(t, []int{200, 429, 429}, codes)
	bal, present := l.Balance("198.51.100.1")
	require.True(t, present)
	require.Zero(t, bal)
	require.Equal(t, 1, l.Len(), "the addresses the client wrote were keys: %s", strings.Join([]string{"203.0.113.10", "203.0.113.11"}, ", "))
}
