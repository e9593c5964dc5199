// Package adaptivegrpc puts an adaptive concurrency limit
// (github.com/atomicsem/atomicsem/adaptive) on gRPC servers and clients:
// interceptors that admit each RPC through a Limiter and tell it how the RPC
// ended, so that its controller moves the limit with the load.
//
// It is a module of its own, so that the core module does not depend on
// gRPC.
//
// # Server
//
// UnaryServerInterceptor and StreamServerInterceptor admit an RPC before
// its handler runs. When the limit is reached the RPC is shed at once with
// codes.ResourceExhausted, and the handler does not run; WithWait makes it
// wait for a slot instead, until the RPC's context is done. The permit ends
// when the handler returns.
//
// A shed RPC carries a retry hint, as adaptive.Handler's 503 carries
// Retry-After: the trailer grpc-retry-pushback-ms (gRFC A6), a second by
// default, which WithRetryPushback changes. A grpc-go client whose service
// config retries ResourceExhausted waits that long before its next attempt,
// in place of its own backoff, and a negative hint stops it retrying.
//
// # Client
//
// UnaryClientInterceptor and StreamClientInterceptor limit the RPCs a
// client has in flight, for a client that adapts to what its servers can
// take. When the limit is reached the call fails at once, without reaching
// the network, with an error whose code is codes.ResourceExhausted and
// which errors.Is reports as adaptive.ErrLimited; WithWait makes it wait
// instead. A unary call's permit ends when the call returns; a stream's
// when the stream ends, in any of the ways grpc-go documents (RecvMsg
// returns io.EOF or an error, SendMsg or Header return an error other than
// io.EOF, the call's context is done, or the ClientConn is closed),
// whichever comes first. The interceptor learns of the last through
// grpc.OnFinish, which grpc-go marks experimental.
//
// # Streams
//
// A stream holds one permit for its whole life, so the limit bounds the
// streams open at once, and the stream's duration is its round-trip time.
// For long-lived streams, whose duration says nothing about load, give the
// streaming methods a Limiter of their own, or a Classifier that ends them
// Ignored.
//
// # Outcomes
//
// Every interceptor ends each permit with the verdict of one Classifier,
// given the RPC's context, its full method name and the error it ended
// with; Classify is the default, and WithClassifier replaces it:
//
//	RPC ended                                              outcome
//	-------------------------------------------------      ------------
//	its context ended first (the client went away, its     Inconclusive
//	  deadline passed), whatever the handler returned
//	no error (codes.OK)                                    Succeeded
//	ResourceExhausted, Unavailable, DeadlineExceeded       Dropped
//	Unknown, Internal, DataLoss, Unimplemented, Canceled   Inconclusive
//	any other code                                         Succeeded
//
// An error's code is the one its gRPC status carries (status.Code), and a
// context error's own (context.DeadlineExceeded is DeadlineExceeded,
// context.Canceled is Canceled), wrapped or not. ResourceExhausted and
// Unavailable are overload or unavailability, of this server or of one
// behind it whose answer it passes on, and DeadlineExceeded, returned while
// the RPC's own context is live, a call behind it that took longer than
// its deadline: all three are the congestion the controller backs off
// from. An RPC whose context ended first is a client that left or a
// deadline that passed (gRPC sends a client's deadline to its server, and
// a client whose deadline passes cancels the call, so the server sees
// either), and an answer given after that comes too late to be a success:
// Inconclusive, which the Limiter counts as Dropped if the RPC lasted
// longer than its latency bound, having waited where the service keeps no
// request that long, and as Ignored otherwise, as a client's own deadline
// shorter than the service's latency says nothing about load
// (adaptive.WithLatencyBound). The server errors (Unknown, Internal,
// DataLoss, Unimplemented) and Canceled are Inconclusive too: a server
// that fails may fail at once, and the time of its failures is no sample
// of its latency. Any other code is an answer about the request itself
// (InvalidArgument, NotFound, PermissionDenied, and so on): the request
// took the server's time like any other, so its round trip is a sample.
// This is the rule adaptive.Handler applies to HTTP, with 429 and 503 in
// the place of ResourceExhausted and Unavailable, and the 5xx statuses in
// the place of the server errors.
//
// A handler, an invoker, a streamer or a Classifier that panics ends its
// permit Ignored before the panic goes on, so that a recovery interceptor
// outside this one does not leak the slot.
//
// # Classes, throttling and pushback
//
// The class of a call's context (overload.ContextWithClass) travels as the
// metadata x-request-class (ClassKey): the client interceptors send it,
// unless the call's metadata names a class already, and the server
// interceptors put the class an RPC carries into its handler's context,
// and admit the RPC for it when the Limiter was made adaptive.WithGate.
// Trust the metadata only from clients that cannot set it as they please.
//
// WithThrottle gives the client interceptors client-side adaptive
// throttling (overload.Throttle, the Google SRE rule): a call is refused
// locally, with ResourceExhausted and adaptive.ErrThrottled, in the share
// of calls the server has been refusing (ResourceExhausted, Unavailable).
// WithMaxRetryPushback makes them honour the grpc-retry-pushback-ms that a
// server interceptor sends with a shed RPC: until it has passed, calls fail
// at once with ResourceExhausted and an *adaptive.RetryAfterError. Both
// refuse before the Limiter and the network, and match adaptive.ErrLimited.
//
// It is a run-time error to pass an interceptor a nil Limiter or Option,
// or WithClassifier a nil Classifier; the panic message begins
// "adaptivegrpc: ".
package adaptivegrpc
