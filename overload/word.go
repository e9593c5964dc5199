package overload

// The gate's word.
//
// Everything an admission decides on lives in one uint64, changed only by
// compare-and-swap: the permits each class holds, the limit, and one bit
// per class that sends its arrivals to the queue lock. An admission is one
// load, the checks, and one CAS of the whole word, so no admission can be
// decided on a count that another has changed: the global limit and each
// class's ceiling hold at every CAS.
//
// The counts share the high 60 bits equally, so their width depends on the
// number of classes k (one field per class and one for the limit):
//
//	k  width  MaxPermits
//	1   30    1,073,741,823
//	2   20        1,048,575
//	3   15           32,767
//	4   12            4,095
//
// With four classes:
//
//	 63 ....... 52  51 ....... 40  39 ....... 28  27 ....... 16  15 ........ 4  3  2  1  0
//	+-------------+-------------+-------------+-------------+-------------+--+--+--+--+
//	|   limit     |  held[3]    |  held[2]    |  held[1]    |  held[0]    |b3|b2|b1|b0|
//	+-------------+-------------+-------------+-------------+-------------+--+--+--+--+
//
//	held[c]  permits held by tokens of class c
//	limit    the live limit, in the word's top bits
//	b[c]     class c's arrivals go to the queue lock: a waiter is queued that
//	         such an arrival must not overtake (see blocksLocked)
//
// The permits held in all are the sum of the class fields, gathered in one
// multiplication (see layout.held): multiplying the fields by
// 2^s·(1 + 2^width + 2^2·width + …) adds them all up in the word's top
// width bits, where a shift reads them with no mask, as it reads the
// limit; no partial sum carries into the total, because every partial sum
// is at most the total, which fits a field (W2). An admission of n permits
// of class c adds n to its field; a release subtracts as much, after
// checking that the class holds that many, so no field ever borrows from
// the next.
//
// Invariants, for a gate of maximum max:
//
//	W1  0 ≤ limit ≤ max ≤ MaxPermits(k)
//	W2  Σ held[c] ≤ max
//	W3  an admission leaves Σ held[c] ≤ limit and held[c] ≤ ceiling(c,
//	    limit): no admission ever takes the gate past its limit or a class
//	    past its ceiling (a lowered limit may leave the total above it:
//	    that is debt, paid off by releases before anyone is admitted)
//	W4  with the queue lock free, b[c] is set iff the gate is closed, a
//	    queued waiter must be served before an arrival of class c, or a
//	    class above c was overloaded at the last dispatch; so while every
//	    bit is clear, nobody is queued and the gate is open
//	W5  while any bit is set, releases go to the queue lock, so the counts
//	    of a class with waiters change only under the lock
//
// Every field is decoded and replaced through the helpers below, never by
// shifts written out at the call, and every CAS installs a word rebuilt
// from the one it loaded, so no bit of another field is lost. The helpers
// mask their shift counts with 63, which changes nothing (every count is
// below 64) and lets the compiler drop its check for counts of 64 and more.

// word is a packed gate state. Its layout depends on the gate's number of
// classes, so it is decoded through a layout.
type word uint64

const (
	// countBits is how many high bits of the word the counts share.
	countBits = 60
	// fieldsShift is where the class fields begin, above the block bits.
	fieldsShift = 64 - countBits
	// allBlocks has every block bit set.
	allBlocks word = 1<<MaxClasses - 1
)

// blockBit returns the bit that sends class c's arrivals to the lock.
func blockBit(c int) word { return 1 << uint(c) }

// blocks returns w's block bits.
func (w word) blocks() word { return w & allBlocks }

// withBlocks returns w with its block bits replaced by b; every count is
// kept.
func (w word) withBlocks(b word) word { return w&^allBlocks | b&allBlocks }

// layout says where the counts of a gate with k classes lie in its word.
// It never changes after New.
type layout struct {
	k     int
	width uint // bits per count
	mask  word // 1<<width − 1
	// top is where the limit begins, 64 − width: a shift by top reads the
	// word's top width bits with no mask.
	top uint
	// classes masks the class fields; multiplying them by sumMul gathers
	// their sum in the top width bits.
	classes word
	sumMul  word
}

func newLayout(k int) layout {
	width := uint(countBits / (k + 1))
	width = min(width, 30) // k = 1: a count and a limit, as wide as atomicsem's
	l := layout{k: k, width: width, mask: 1<<width - 1, top: 64 - width}
	l.classes = (1<<(uint(k)*width) - 1) << fieldsShift
	// Field c sits at fieldsShift + c·width; the term that carries it to
	// the top multiplies by 2^(top − fieldsShift − c·width).
	for c := range k {
		l.sumMul |= 1 << (l.top - fieldsShift - uint(c)*width)
	}
	return l
}

// maxPermits returns the widest count the layout holds.
func (l *layout) maxPermits() int64 { return int64(l.mask) }

// held returns the permits held in all, the sum of the class fields.
func (l *layout) held(w word) int64 { return int64((w & l.classes) * l.sumMul >> (l.top & 63)) }

// limit returns the live limit.
func (l *layout) limit(w word) int64 { return int64(w >> (l.top & 63)) }

// shift returns where class c's field begins.
func (l *layout) shift(c int) uint { return fieldsShift + uint(c)*l.width }

// classHeld returns the permits held by tokens of class c.
func (l *layout) classHeld(w word, c int) int64 { return l.field(w, l.shift(c)) }

// field returns the count whose field begins at bit shift: the fast paths
// keep each class's shift beside its other constants and call this
// directly.
func (l *layout) field(w word, shift uint) int64 { return int64(w >> (shift & 63) & l.mask) }

// unit returns what one permit of class c adds to the word.
func (l *layout) unit(c int) word { return 1 << (l.shift(c) & 63) }

// withLimit returns w with the limit replaced; every other bit is kept. It
// requires 0 ≤ limit ≤ maxPermits.
func (l *layout) withLimit(w word, limit int64) word {
	shift := l.top & 63
	return w&^(l.mask<<shift) | word(limit)<<shift
}

// pack builds a word of an open gate with nothing queued from the limit and
// each class's count (one per class). It requires that the counts fit.
func (l *layout) pack(limit int64, classHeld []int64) word {
	w := l.withLimit(0, limit)
	for c, h := range classHeld {
		w += word(h) * l.unit(c)
	}
	return w
}

// The transitions. Each is a pure function of the old word: it returns the
// word to install and whether the operation may happen at all; a refused
// one returns the old word. Callers have checked that n is within
// [0, maxPermits] and c within [0, k).

// admit takes n permits for class c if nothing sends c's arrivals to the
// lock (a waiter it must not overtake, or a closed gate), the total stays
// within the limit and the class within ceiling. It is the fast path's
// test, written out inline in Gate.acquireFast.
func (l *layout) admit(w word, c int, n, ceiling int64) (word, bool) {
	if w&blockBit(c) != 0 {
		return w, false
	}
	return l.grant(w, c, n, ceiling)
}

// grant takes n permits for class c if the total stays within the limit
// and the class within ceiling, whatever the block bits say: the lock
// holder's admission, which has already put its waiter in order.
func (l *layout) grant(w word, c int, n, ceiling int64) (word, bool) {
	if l.held(w)+n > l.limit(w) || l.classHeld(w, c)+n > ceiling {
		return w, false
	}
	return w + word(n)*l.unit(c), true
}

// release returns n permits of class c. It refuses if the class holds
// fewer: a token ended twice (through a copy), which changes nothing.
func (l *layout) release(w word, c int, n int64) (word, bool) {
	if l.classHeld(w, c) < n {
		return w, false
	}
	return w - word(n)*l.unit(c), true
}

// forget returns n permits of class c and lowers the limit by as many, but
// not below zero.
func (l *layout) forget(w word, c int, n int64) (word, bool) {
	w, ok := l.release(w, c, n)
	if !ok {
		return w, false
	}
	return l.withLimit(w, max(l.limit(w)-n, 0)), true
}

// checkInvariants returns a description of the first of W1 and W2 that w
// breaks for a gate of maximum max, or "" if it holds both.
func (l *layout) checkInvariants(w word, max int64) string {
	held, limit := l.held(w), l.limit(w)
	switch {
	case limit < 0 || limit > max || max > l.maxPermits():
		return "W1: want 0 ≤ limit ≤ max ≤ MaxPermits"
	case held > max:
		return "W2: want Σ held[c] ≤ max"
	}
	return ""
}
