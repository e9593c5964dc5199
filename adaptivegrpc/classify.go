package adaptivegrpc

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/adaptive"
)

// A Classifier decides how an RPC's permit ends, from the RPC's context,
// its full method name ("/package.Service/Method") and the error it ended
// with (nil for success). It is called once per admitted RPC, from the
// goroutine that ends it, and must be safe for concurrent use.
type Classifier func(ctx context.Context, method string, err error) adaptive.Outcome

// Classify is the default Classifier, the rule in the package doc: no
// error is Succeeded; ResourceExhausted, Unavailable and DeadlineExceeded
// are Dropped; Canceled is Ignored, unless ctx was cancelled at its
// deadline (see DeadlineSlack), which is Dropped; any other code is
// Dropped if ctx ended at its deadline, Ignored if ctx was cancelled, and
// Succeeded otherwise. The method name is not consulted.
func Classify(ctx context.Context, method string, err error) adaptive.Outcome {
	if err == nil {
		return adaptive.Succeeded
	}
	switch code(err) {
	case codes.ResourceExhausted, codes.Unavailable, codes.DeadlineExceeded:
		return adaptive.Dropped
	case codes.Canceled:
		if timedOut(ctx) {
			return adaptive.Dropped
		}
		return adaptive.Ignored
	}
	switch {
	case ctx.Err() == nil:
		return adaptive.Succeeded
	case timedOut(ctx):
		return adaptive.Dropped
	}
	return adaptive.Ignored
}

// DeadlineSlack is how close to its deadline a context's cancellation
// counts, for Classify, as the deadline passing. A gRPC client whose
// deadline passes cancels the call with the same HTTP/2 frame as any
// cancellation, and the server's copy of the deadline, which starts when
// the server reads the request's headers, runs out a little after the
// client's: so a server usually sees its callers' deadlines as
// cancellations just before its own deadline.
const DeadlineSlack = 10 * time.Millisecond

// timedOut reports whether ctx, which may not be done, ended with its
// deadline or was cancelled within DeadlineSlack of it.
func timedOut(ctx context.Context) bool {
	switch ctx.Err() {
	case nil:
		return false
	case context.DeadlineExceeded:
		return true
	}
	d, ok := ctx.Deadline()
	return ok && time.Until(d) <= DeadlineSlack
}

// code returns the gRPC code of a non-nil err: its status's, or a context
// error's own, or Unknown. A status error or a bare context error, the
// cases a handler or a call usually returns, is decoded without allocating.
func code(err error) codes.Code {
	type grpcStatus interface{ GRPCStatus() *status.Status }
	if gs, ok := err.(grpcStatus); ok {
		return statusCode(gs.GRPCStatus())
	}
	switch err {
	case context.DeadlineExceeded:
		return codes.DeadlineExceeded
	case context.Canceled:
		return codes.Canceled
	}
	var gs grpcStatus
	switch {
	case errors.As(err, &gs):
		return statusCode(gs.GRPCStatus())
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return codes.Unknown
}

// statusCode returns s's code, or Unknown for a nil s: an error whose status
// is nil is no success, and status.FromError reads it as Unknown too.
func statusCode(s *status.Status) codes.Code {
	if s == nil {
		return codes.Unknown
	}
	return s.Code()
}
