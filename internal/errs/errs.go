// Package errs makes the errors a package returns speak in that package's
// words while matching, with errors.Is and errors.As, the sentinel of the
// package that defines the condition: keyed says "keyed: a request for -1
// credits", which matches atomicsem.ErrInvalidPermits, without quoting
// atomicsem's message. fmt.Errorf with %w would put both packages' words
// in one message.
package errs

import (
	"fmt"
	"strings"
)

// kindError is an error with a message of its own that unwraps to the
// error it is a kind of.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// Errorf returns an error whose message is fmt.Sprintf(format, args...)
// and which matches kind, and whatever kind matches, with errors.Is.
func Errorf(kind error, format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// Reprefix returns err in the words of package pkg: its message with its
// leading package name (the text up to the first ": ") replaced by pkg,
// matching err, and whatever err matches, with errors.Is. It returns nil
// for a nil err.
func Reprefix(pkg string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if i := strings.Index(msg, ": "); i >= 0 && !strings.ContainsAny(msg[:i], " \t") {
		msg = msg[i+2:]
	}
	return &kindError{msg: pkg + ": " + msg, kind: err}
}
