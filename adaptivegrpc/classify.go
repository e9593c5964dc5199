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

// Classify is the default Classifier, the rule in the package doc, in
// this order: an RPC whose context ended first (its client went away, its
// deadline passed), whatever it returned, is Inconclusive; no error is
// Succeeded; ResourceExhausted, Unavailable and DeadlineExceeded are
// Dropped; Unknown, Internal, DataLoss, Unimplemented and Canceled are
// Inconclusive; any other code is Succeeded. The method name is not
// consulted.
func Classify(ctx context.Context, method string, err error) adaptive.Outcome {
	if ended(ctx) {
		return adaptive.Inconclusive
	}
	if err == nil {
		return adaptive.Succeeded
	}
	switch code(err) {
	case codes.ResourceExhausted, codes.Unavailable, codes.DeadlineExceeded:
		return adaptive.Dropped
	case codes.Unknown, codes.Internal, codes.DataLoss, codes.Unimplemented, codes.Canceled:
		return adaptive.Inconclusive
	}
	return adaptive.Succeeded
}

// ended reports whether ctx has ended: it is done, or its deadline has
// passed. The second is asked too because a context's timer fires on a
// goroutine of its own, and grpc-go's own check of the deadline can fail a
// call with DeadlineExceeded before it does; without it, such a call
// counted as a call behind that timed out.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
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
