//go:build race

package token

// Under the race detector every token is tracked: New gives it a cell of
// its own, which the tag carries, and the token's end marks the cell ended
// before it changes anything else. A copy carries the same cell, so of a
// token and its copies only the first to end finds it live, and every
// later end panics, the fast path's tokens included, where a semaphore
// could not tell the copy's permits from another holder's.
//
// The cell is plain memory, not a lock or an atomic: the race detector
// counts a lock's release and acquire, and an atomic's store and load, as
// synchronization, and a shared record of tokens would order every end
// before the next issue, hiding from it the very races it is there to find
// (a semaphore whose Release did not synchronize before the Acquire it
// admits, say). A cell is touched only by the goroutines that end the
// token and its copies; when two of them are not ordered, the race
// detector reports it, as it reports any two ends of one token at once.
// The production build carries none of this (track_norace.go).

type ownerTag struct {
	v    uint32
	cell *cell // the token's cell; nil for the zero Token
}

// A cell records whether a token, or a copy of it, has ended.
type cell struct{ ended bool }

// issue returns the tag of a new token, with a fresh cell.
func issue(v uint32) ownerTag { return ownerTag{v: v, cell: new(cell)} }

// checkIssued panics with misuse if t, a live token, is a copy of one that
// has ended.
func (t *Token) checkIssued(misuse error) {
	if t.tag.cell.ended {
		panic(misuse)
	}
}

// end marks t, a live token, ended, or panics with misuse, changing
// nothing, if a copy of it has ended.
func (t *Token) end(misuse error) {
	t.checkIssued(misuse)
	t.tag.cell.ended = true
}

// Release gives the token's permits back to the semaphore that issued it;
// see the documentation of the build without the race detector. Here it
// also panics, changing nothing, on a nil *Token and on a copy of a token
// that has ended.
func (t *Token) Release() {
	if t == nil || t.state != live {
		panic(releaseMisuse(t.stateOrNil()))
	}
	t.end(releaseMisuse(live))
	t.state = spent
	t.owner.ReturnPermits(t.n, t.tag.v)
}

// Forget drops the token's permits for good; see the documentation of the
// build without the race detector. Here it also panics, changing nothing,
// on a nil *Token and on a copy of a token that has ended.
func (t *Token) Forget() {
	if t == nil || t.state != live {
		panic(forgetMisuse(t.stateOrNil()))
	}
	t.end(forgetMisuse(live))
	t.state = spent
	t.owner.ForgetPermits(t.n, t.tag.v)
}
