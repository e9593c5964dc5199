//go:build race

package token

import "sync"

// Under the race detector every token is tracked: New gives it an identity,
// kept in the tag it carries, and records it as issued; the token's end
// takes the identity off the record before it changes anything. A copy
// carries the same identity, so of a token and its copies only the first
// to end finds it, and every later end panics, the fast path's tokens
// included, where a semaphore could not tell the copy's permits from
// another holder's. The record is a map under a mutex: the race build is
// for finding bugs, not for speed, and the production build carries none of
// it (track_norace.go).

type ownerTag struct {
	v  uint32
	id uint64 // the token's identity; 0 for the zero Token
}

// issued is the set of tokens issued and not yet ended.
var issued struct {
	sync.Mutex
	ids  map[uint64]struct{}
	next uint64
}

// issue returns the tag of a new token, with a fresh identity recorded as
// issued.
func issue(v uint32) ownerTag {
	issued.Lock()
	defer issued.Unlock()
	if issued.ids == nil {
		issued.ids = make(map[uint64]struct{})
	}
	issued.next++
	issued.ids[issued.next] = struct{}{}
	return ownerTag{v: v, id: issued.next}
}

// checkIssued panics with misuse if t, a live token, is a copy of one that
// has ended.
func (t *Token) checkIssued(misuse error) {
	issued.Lock()
	_, ok := issued.ids[t.tag.id]
	issued.Unlock()
	if !ok {
		panic(misuse)
	}
}

// end takes t, a live token, off the record, or panics with misuse,
// changing nothing, if a copy of it has ended.
func (t *Token) end(misuse error) {
	issued.Lock()
	_, ok := issued.ids[t.tag.id]
	delete(issued.ids, t.tag.id)
	issued.Unlock()
	if !ok {
		panic(misuse)
	}
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
