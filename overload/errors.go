package overload

import (
	"errors"

	"github.com/atomicsem/atomicsem/semcontract"
)

// The errors a request may get instead of permits. ErrQueueFull, ErrMaxWait,
// ErrDropped and ErrDeadline are sheds, decisions of the gate's queue
// discipline that the request should not be served: each matches ErrShed
// with errors.Is, so that a caller can answer all of them alike (the HTTP
// middleware answers 503). A context that ends first is reported as
// ctx.Err(), unwrapped.
var (
	// ErrShed matches every shed: ErrQueueFull, ErrMaxWait, ErrDropped
	// and ErrDeadline.
	ErrShed = errors.New("overload: request shed")
	// ErrQueueFull is returned by Acquire when the request would have to
	// wait and the queue holds its maximum (WithMaxQueue), or to a waiter
	// pushed out of a full queue by a request of a higher class.
	ErrQueueFull error = shed("overload: queue full")
	// ErrMaxWait is returned by Acquire when the request waited for the
	// maximum wait (WithMaxWait) without being served, or at once when the
	// wait the gate expects for it is longer than that.
	ErrMaxWait error = shed("overload: maximum wait exceeded")
	// ErrDropped is returned by Acquire to a request shed by the overload
	// mode (WithCoDel): its class's queue stood above the target delay for
	// an interval and it had waited more than twice the target, or a class
	// above its own sheds the classes below (then an arrival is refused at
	// once).
	ErrDropped error = shed("overload: dropped from an overloaded queue")
	// ErrDeadline is returned by Acquire at once, without waiting, when
	// the request's context has a deadline that comes before the wait the
	// gate expects for it ends.
	ErrDeadline error = shed("overload: deadline before the expected wait")
)

// The errors shared with the semaphores, so that errors.Is matches them
// whichever of the project's limits returned them (semcontract's).
var (
	// ErrClosed is returned by Acquire and SetLimit after Close.
	ErrClosed = semcontract.ErrClosed
	// ErrExceedsMax is returned (wrapped, with the numbers) for a request
	// that its class could never hold, at the gate's maximum limit, and for
	// a limit above the maximum.
	ErrExceedsMax = semcontract.ErrExceedsMax
	// ErrInvalidPermits is returned (wrapped, with the numbers) for a
	// negative request or one above MaxPermits(Classes()), for a negative
	// limit, and by New for limits outside
	// 0 ≤ limit ≤ max ≤ MaxPermits(len(classes)).
	ErrInvalidPermits = semcontract.ErrInvalidPermits
	// ErrInvalidClasses is returned (wrapped, with the reason) by New for
	// classes it cannot build a gate of: none or more than MaxClasses, a
	// name empty or repeated, a share outside [0, 1] or shares adding up to
	// more than 1, a MaxShare outside [Share, 1].
	ErrInvalidClasses = errors.New("overload: invalid classes")
	// ErrInvalidOption is returned (wrapped, with the reason) by New for
	// an option out of its range.
	ErrInvalidOption = errors.New("overload: invalid option")
)

// shed is the type of the shed errors: each is its own sentinel and
// matches ErrShed.
type shed string

func (e shed) Error() string { return string(e) }

// Is reports whether target is ErrShed, so that errors.Is(err, ErrShed)
// holds for every shed.
func (e shed) Is(target error) bool { return target == ErrShed }
