package adaptivegrpc_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/adaptive"
	"github.com/atomicsem/atomicsem/adaptivegrpc"
)

// nilStatusError has a GRPCStatus method that returns nil: an error all
// the same, which status.FromError reads as Unknown.
type nilStatusError struct{}

func (nilStatusError) Error() string              { return "no status" }
func (nilStatusError) GRPCStatus() *status.Status { return nil }

type classifyCase struct {
	name string
	ctx  context.Context
	err  error
	want adaptive.Outcome
}

// TestClassifyFollowsTheDocumentedTable checks every row of the package
// doc's table, and that an error's code is found through wrapping.
func TestClassifyFollowsTheDocumentedTable(t *testing.T) {
	bg := context.Background()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	expired, cancel2 := context.WithDeadline(bg, time.Unix(0, 0))
	defer cancel2()
	// A client that left long before its deadline.
	left, cancel4 := context.WithTimeout(bg, time.Hour)
	cancel4()
	// A deadline passed whose timer has not fired yet: grpc-go's own
	// check of the deadline can fail the call before the context's timer
	// ends it.
	unfired := pastDeadline{bg}

	tests := []classifyCase{
		{"no error", bg, nil, adaptive.Succeeded},
		{"no error, after the deadline", expired, nil, adaptive.Inconclusive},
		{"no error, after the client left", cancelled, nil, adaptive.Inconclusive},
		{"ResourceExhausted", bg, status.Error(codes.ResourceExhausted, "full"), adaptive.Dropped},
		{"Unavailable", bg, status.Error(codes.Unavailable, "down"), adaptive.Dropped},
		{"DeadlineExceeded, the context live", bg, status.Error(codes.DeadlineExceeded, "slow"), adaptive.Dropped},
		{"DeadlineExceeded, the deadline passed", expired, status.Error(codes.DeadlineExceeded, "slow"), adaptive.Inconclusive},
		{"DeadlineExceeded, the deadline passed, its timer not yet fired", unfired, status.Error(codes.DeadlineExceeded, "slow"), adaptive.Inconclusive},
		{"Canceled, the context live", bg, status.Error(codes.Canceled, "gone"), adaptive.Inconclusive},
		{"Canceled, the deadline passed", expired, status.Error(codes.Canceled, "gone"), adaptive.Inconclusive},
		{"Canceled long before the deadline", left, status.Error(codes.Canceled, "gone"), adaptive.Inconclusive},
		{"Unavailable, though the client left", cancelled, status.Error(codes.Unavailable, "down"), adaptive.Inconclusive},
		{"bare context.DeadlineExceeded, the context live", bg, context.DeadlineExceeded, adaptive.Dropped},
		{"bare context.Canceled, the context live", bg, context.Canceled, adaptive.Inconclusive},
		{"wrapped context.DeadlineExceeded", bg, fmt.Errorf("query: %w", context.DeadlineExceeded), adaptive.Dropped},
		{"wrapped context.Canceled", bg, fmt.Errorf("query: %w", context.Canceled), adaptive.Inconclusive},
		{"wrapped Unavailable", bg, fmt.Errorf("backend: %w", status.Error(codes.Unavailable, "down")), adaptive.Dropped},
		{"wrapped InvalidArgument", bg, fmt.Errorf("backend: %w", status.Error(codes.InvalidArgument, "bad")), adaptive.Succeeded},
		{"wrapped Internal", bg, fmt.Errorf("backend: %w", status.Error(codes.Internal, "bug")), adaptive.Inconclusive},
		{"the shed error of this package", bg, shedError(t), adaptive.Dropped},
		{"a status error that is nil (Unknown)", bg, nilStatusError{}, adaptive.Inconclusive},
		{"plain error (Unknown)", bg, errors.New("query failed"), adaptive.Inconclusive},
		{"plain error, deadline passed", expired, errors.New("query failed"), adaptive.Inconclusive},
		{"plain error, client left", cancelled, errors.New("query failed"), adaptive.Inconclusive},
	}
	for c := codes.OK + 1; c <= codes.Unauthenticated; c++ {
		want := adaptive.Succeeded
		switch c {
		case codes.ResourceExhausted, codes.Unavailable, codes.DeadlineExceeded:
			want = adaptive.Dropped
		case codes.Unknown, codes.Internal, codes.DataLoss, codes.Unimplemented, codes.Canceled:
			want = adaptive.Inconclusive
		}
		tests = append(tests,
			classifyCase{"code " + c.String(), bg, status.Error(c, "x"), want},
			classifyCase{"code " + c.String() + ", deadline passed", expired, status.Error(c, "x"), adaptive.Inconclusive},
			classifyCase{"code " + c.String() + ", client left", cancelled, status.Error(c, "x"), adaptive.Inconclusive})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, adaptivegrpc.Classify(tt.ctx, "/s/M", tt.err))
		})
	}
}

// shedError returns the error a client interceptor sheds a call with.
func shedError(t *testing.T) error {
	lim := fixedLimiter(t, 1)
	var p adaptive.Permit
	require.True(t, lim.TryAcquire(&p))
	defer p.End(adaptive.Ignored)
	intercept := adaptivegrpc.UnaryClientInterceptor(lim)
	err := intercept(context.Background(), "/s/M", nil, nil, nil, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		t.Fatal("a shed call reached the invoker")
		return nil
	})
	require.Error(t, err)
	return err
}

// TestShedErrorIsResourceExhaustedAndErrLimited checks both ways of
// recognising a shed call.
func TestShedErrorIsResourceExhaustedAndErrLimited(t *testing.T) {
	err := shedError(t)
	require.Equal(t, codes.ResourceExhausted, status.Code(err))
	require.ErrorIs(t, err, adaptive.ErrLimited)
	require.Contains(t, err.Error(), "adaptivegrpc: ")
}

// pastDeadline is a context whose deadline has passed but which is not done
// yet, as a context is between its deadline and its timer's firing.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Unix(0, 0), true }
