package adaptivegrpc

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/adaptive"
)

// UnaryClientInterceptor returns an interceptor that admits each unary call
// through lim before it is sent, and ends the permit with the Classifier's
// verdict on the call's error when it returns. When lim has no free slot,
// the call fails at once, without reaching the network, with an error whose
// code is codes.ResourceExhausted and which errors.Is reports as
// adaptive.ErrLimited; WithWait makes it wait instead. It is a run-time
// error to pass a nil lim or Option.
func UnaryClientInterceptor(lim *adaptive.Limiter, opts ...Option) grpc.UnaryClientInterceptor {
	c := newConfig(lim, opts)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		var p adaptive.Permit
		if err := c.admit(ctx, &p); err != nil {
			return err
		}
		// Ignored stands until the classifier's verdict replaces it, so
		// that a panic in the invoker or the classifier frees the slot too.
		o := adaptive.Ignored
		defer func() { p.End(o) }()
		err := invoker(ctx, method, req, reply, cc, callOpts...)
		o = c.classify(ctx, method, err)
		return err
	}
}

// StreamClientInterceptor returns an interceptor that admits each stream
// through lim before it is opened and holds the permit until the stream
// ends, in any of the ways grpc-go documents: RecvMsg returns io.EOF
// (Succeeded) or another error, a stream with one response (client
// streaming) receives it, SendMsg or Header return an error other than
// io.EOF, the call's context is done, or the ClientConn is closed,
// whichever comes first. The permit ends with the Classifier's verdict on
// the stream's error (the context's, or codes.Canceled for a closed
// ClientConn). When lim has no free slot, the stream fails at once as
// UnaryClientInterceptor's calls do; WithWait makes it wait instead. It is
// a run-time error to pass a nil lim or Option.
func StreamClientInterceptor(lim *adaptive.Limiter, opts ...Option) grpc.StreamClientInterceptor {
	c := newConfig(lim, opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		s := &clientStream{ctx: ctx, method: method, classify: c.classify, oneReply: !desc.ServerStreams}
		if err := c.admit(ctx, &s.p); err != nil {
			return nil, err
		}
		// A caller that cancels the stream's context need not read on to
		// the error: the permit must end with the context, or its slot
		// would be lost. AfterFunc starts no goroutine until ctx is done.
		// It is registered before the stream opens, so that every end,
		// which may come from grpc-go's goroutines while the stream opens,
		// finds stop set.
		s.stop = context.AfterFunc(ctx, s.contextDone)
		cs, err := s.open(ctx, desc, cc, method, streamer, callOpts)
		if err != nil {
			return nil, err
		}
		s.ClientStream = cs
		return s, nil
	}
}

// open opens the stream with streamer, asking grpc-go to call s.end when
// the stream finishes: that is the one signal of a ClientConn closed under
// a stream nobody reads, and it covers the other ends too. If opening
// fails, open ends the permit with the verdict on the error; Ignored stands
// until the verdict replaces it, so that a panic in the streamer or the
// classifier frees the slot too.
func (s *clientStream) open(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts []grpc.CallOption) (grpc.ClientStream, error) {
	failed := true
	defer func() {
		if failed {
			s.end(errStreamerPanicked)
		}
	}()
	callOpts = append(callOpts[:len(callOpts):len(callOpts)], grpc.OnFinish(s.end))
	cs, err := streamer(ctx, desc, cc, method, callOpts...)
	failed = false
	if err != nil {
		s.end(err)
		return nil, err
	}
	return cs, nil
}

// errStreamerPanicked stands for the error of a streamer that panicked,
// whose permit ends Ignored.
var errStreamerPanicked = errors.New("adaptivegrpc: the streamer panicked")

// clientStream ends its permit when the stream ends. One goroutine may
// send while another receives, and grpc-go's and the context's callbacks
// run on others, so the end is claimed atomically.
type clientStream struct {
	grpc.ClientStream
	ctx      context.Context
	method   string
	classify Classifier
	oneReply bool        // the stream has one response, after which it ends
	stop     func() bool // unregisters contextDone; set before the stream opens
	done     atomic.Bool
	p        adaptive.Permit
}

func (s *clientStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	switch {
	case err == io.EOF:
		s.end(nil)
	case err != nil:
		s.end(err)
	case s.oneReply:
		s.end(nil)
	}
	return err
}

func (s *clientStream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if err != nil && err != io.EOF { // io.EOF: the stream ended; RecvMsg has its status
		s.end(err)
	}
	return err
}

func (s *clientStream) Header() (metadata.MD, error) {
	md, err := s.ClientStream.Header()
	if err != nil && err != io.EOF {
		s.end(err)
	}
	return md, err
}

// end ends the permit with the verdict on err, unless it has ended.
func (s *clientStream) end(err error) {
	if s.done.CompareAndSwap(false, true) {
		s.stop()
		s.finish(err)
	}
}

// finish ends the permit with the verdict on err. Ignored stands until the
// verdict replaces it, so that a classifier that panics frees the slot too.
func (s *clientStream) finish(err error) {
	o := adaptive.Ignored
	defer func() { s.p.End(o) }()
	if err != errStreamerPanicked {
		o = s.classify(s.ctx, s.method, err)
	}
}

// contextDone ends the permit when the stream's context is done first.
// It does not call stop, which the goroutine that installed it may still
// be setting.
func (s *clientStream) contextDone() {
	if s.done.CompareAndSwap(false, true) {
		s.finish(status.FromContextError(s.ctx.Err()).Err())
	}
}
