package overload

import (
	"fmt"
	"math"
	"strings"
)

// MaxClasses is the largest number of classes a Gate has: Google's four
// criticalities (critical-plus, critical, sheddable-plus, sheddable) fit.
// The classes share the gate's word with its counts, so the fewer there
// are, the larger the limit can be (see MaxPermits).
const MaxClasses = 4

// MaxPermits returns the largest limit, maximum or request of a Gate with
// k classes: 2^30 − 1 for one class (atomicsem's MaxPermits), 2^20 − 1 for
// two, 2^15 − 1 for three and 2^12 − 1 for four. It returns 0 for k outside
// [1, MaxClasses].
func MaxPermits(k int) int64 {
	if k < 1 || k > MaxClasses {
		return 0
	}
	l := newLayout(k)
	return l.maxPermits()
}

// Class describes one class of requests: its name, its guaranteed share of
// the limit, and how much of the limit it may hold at most. New takes the
// classes in priority order, highest first.
//
// The zero Class (but for its name) has no guaranteed share and may hold
// the whole limit: it is served only in its turn by priority, from what
// the classes above it leave.
type Class struct {
	// Name identifies the class to the HTTP middleware (a header's value)
	// and in Stats. Names are compared without regard to case, and must
	// be distinct and not empty.
	Name string
	// Share is the fraction of the limit guaranteed to the class: its
	// reserve is about Share × limit permits (see Gate for the rounding;
	// shares are kept in 2^-32ths, rounded down).
	// While the class holds less than its reserve, its waiters are served
	// before anyone who would hold more than their own, and nobody else
	// is admitted while they wait. A reserve the class does not use is
	// lent to the others until it wants it back. The shares of a gate's
	// classes add up to at most 1. The zero value guarantees nothing.
	Share float64
	// MaxShare is the fraction of the limit the class may hold at most,
	// borrowed permits included: its ceiling is ⌈MaxShare × limit⌉ permits.
	// It bounds how much idle share a class can borrow. Zero means 1 (the
	// whole limit); otherwise it must be in [Share, 1].
	MaxShare float64
}

// shareOne is the fixed-point unit of shares: a share s is kept as
// ⌊s × shareOne⌋, so that reserves and ceilings are computed in integers,
// exactly and alike on every platform. Rounding down makes a share written
// in decimal, whose float64 is a hair above or below it, give the reserve
// the decimal says (0.8 of 100 is 80, not 81); 2^32 keeps the error below a
// quarter of a permit at the largest limit, and share × limit within
// int64.
const (
	shareBits = 32
	shareOne  = 1 << shareBits
)

// classConfig is a class as the gate uses it. It never changes after New.
// The fields the fast paths read come first, so that a class's share of
// them sits in one cache line.
type classConfig struct {
	block word // the bit that sends the class's arrivals to the lock
	unit  word // what one permit adds to the word
	field word // the bits of the class's count
	shift uint // where the class's field begins
	// maxShare is the fixed-point MaxShare, at least the class's own share;
	// ceiled says that it is below the whole limit.
	maxShare int64
	ceiled   bool
	// cumShare is the fixed-point sum of the shares of this class and the
	// classes above it; the class's reserve at limit L is
	// ⌈cumShare·L⌉ − ⌈(previous cumShare)·L⌉, so the reserves add up to
	// ⌈(sum of shares)·L⌉ ≤ L and rounding favours the higher classes.
	cumShare int64
	prevCum  int64
	name     string
}

// ceilingAt returns the most permits class c may hold at limit L,
// ⌈maxShare·L⌉: L itself for a class without a MaxShare, whose maxShare is
// shareOne.
func (cc *classConfig) ceilingAt(limit int64) int64 {
	return (cc.maxShare*limit + shareOne - 1) >> shareBits
}

// reserveAt returns the permits reserved for the class at limit L.
func (cc *classConfig) reserveAt(limit int64) int64 {
	return ceilShare(cc.cumShare, limit) - ceilShare(cc.prevCum, limit)
}

// ceilShare returns ⌈share·limit⌉ for a fixed-point share.
func ceilShare(share, limit int64) int64 {
	return (share*limit + shareOne - 1) >> shareBits
}

// buildClasses checks the classes and returns their configurations in
// priority order.
func buildClasses(classes []Class, l *layout) ([MaxClasses]classConfig, error) {
	var out [MaxClasses]classConfig
	if len(classes) < 1 || len(classes) > MaxClasses {
		return out, fmt.Errorf("%w: %d classes, want 1 to %d", ErrInvalidClasses, len(classes), MaxClasses)
	}
	seen := make(map[string]bool, len(classes))
	var sum float64
	for c, cl := range classes {
		name := strings.ToLower(cl.Name)
		switch {
		case name == "":
			return out, fmt.Errorf("%w: class %d has no name", ErrInvalidClasses, c)
		case seen[name]:
			return out, fmt.Errorf("%w: two classes named %q", ErrInvalidClasses, cl.Name)
		case !(cl.Share >= 0 && cl.Share <= 1): // NaN fails both
			return out, fmt.Errorf("%w: class %q: Share %v outside [0, 1]", ErrInvalidClasses, cl.Name, cl.Share)
		case cl.MaxShare != 0 && !(cl.MaxShare >= cl.Share && cl.MaxShare <= 1):
			return out, fmt.Errorf("%w: class %q: MaxShare %v outside [Share, 1] = [%v, 1]", ErrInvalidClasses, cl.Name, cl.MaxShare, cl.Share)
		}
		seen[name] = true
		sum += cl.Share
		prev := int64(0)
		if c > 0 {
			prev = out[c-1].cumShare
		}
		cum := int64(math.Floor(sum * shareOne))
		if cum > shareOne {
			if sum > 1+1e-9 {
				return out, fmt.Errorf("%w: the shares add up to %v, more than 1", ErrInvalidClasses, sum)
			}
			cum = shareOne // rounding only
		}
		ms := int64(shareOne)
		if cl.MaxShare != 0 {
			ms = max(int64(math.Floor(cl.MaxShare*shareOne)), cum-prev)
		}
		out[c] = classConfig{
			name:     cl.Name,
			cumShare: cum,
			prevCum:  prev,
			maxShare: ms,
			ceiled:   ms < shareOne,
			shift:    l.shift(c),
			unit:     l.unit(c),
			field:    l.mask << (l.shift(c) & 63),
			block:    blockBit(c),
		}
	}
	return out, nil
}
