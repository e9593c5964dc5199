package fuzz_test

// Helpers shared by the fuzz targets and the linearizability check.

import (
	"context"
	"errors"
	"time"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/internal/model"
)

// decoder reads fuzz input as a stream of small choices. Once the input is
// used up every read returns zero, so every input decodes to something and
// short inputs stay meaningful.
type decoder struct {
	b []byte
}

// more reports whether unread input is left.
func (d *decoder) more() bool { return len(d.b) > 0 }

// next returns the next input byte, or 0 at the end.
func (d *decoder) next() byte {
	if len(d.b) == 0 {
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// little returns the next k bytes as a little-endian number.
func (d *decoder) little(k int) uint64 {
	var v uint64
	for i := range k {
		v |= uint64(d.next()) << (8 * i)
	}
	return v
}

// upTo returns a value in [0, limit] that favours the ends of the range,
// where off-by-one mistakes live. It requires limit ≥ 0.
func (d *decoder) upTo(limit int64) int64 {
	switch sel := d.next(); sel % 4 {
	case 0:
		return min(int64(sel/4), limit)
	case 1:
		return max(limit-int64(sel/4), 0)
	default:
		return int64(d.little(4)) % (limit + 1)
	}
}

// arg returns an argument for an operation: half the time an anchor (a
// value of the state the operation runs on, such as the available count)
// plus or minus two, otherwise a value from permits. Anchors are what make
// the boundaries of each check easy to hit.
func (d *decoder) arg(anchors ...int64) int64 {
	sel := d.next()
	if sel%2 == 1 && len(anchors) > 0 {
		return anchors[int(sel/2)%len(anchors)] + int64(d.next()%5) - 2
	}
	return d.permits()
}

// permits returns a count for a request, a limit or New: mostly small,
// sometimes at or just past MaxPermits, negative, or anywhere in int32.
func (d *decoder) permits() int64 {
	switch sel := d.next(); sel % 8 {
	case 4:
		return model.MaxPermits - int64(sel/8%4)
	case 5:
		return model.MaxPermits + 1 + int64(sel/8%4)
	case 6:
		return -1 - int64(sel/8%4)
	case 7:
		return int64(int32(d.little(4)))
	default:
		return int64(sel / 8 % 8)
	}
}

// acquireGuard bounds an Acquire that the model says is granted at once, so
// that a semaphore that waits instead fails the run rather than hangs it.
const acquireGuard = time.Second

// outcomeOf maps a semaphore error to the model's outcome and reports
// whether it is one the contract names.
func outcomeOf(err error) (model.Outcome, bool) {
	switch {
	case err == nil:
		return model.OK, true
	case errors.Is(err, atomicsem.ErrInvalidPermits):
		return model.InvalidPermits, true
	case errors.Is(err, atomicsem.ErrExceedsMax):
		return model.ExceedsMax, true
	case errors.Is(err, atomicsem.ErrClosed):
		return model.Closed, true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return model.CtxDone, true
	}
	return 0, false
}

// doneContext returns a context that is already done: cancelled, or past
// its deadline, as sel picks.
func doneContext(sel byte) context.Context {
	if sel%2 == 0 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	cancel() // releases the timer; the error stays DeadlineExceeded
	return ctx
}
