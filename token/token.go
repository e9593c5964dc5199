// Package token defines Token, the guard a semaphore hands out for the
// permits it grants.
//
// A Token is returned by value from an acquire and ends in exactly one of two
// ways: Release gives its permits back to the semaphore, Forget removes them
// for good (the semaphore's limit drops by that many). Ending a token twice,
// or ending the zero Token, is a caller bug and panics.
package token

import (
	"go.uber.org/atomic"

	"github.com/atomicsem/atomicsem/internal/hook"
	"github.com/atomicsem/atomicsem/internal/mutant"
)

// Owner is what a Token returns its permits to. Semaphore implementations
// satisfy it; callers never need to.
//
// ReturnPermits makes n permits available again. ForgetPermits removes n
// permits from circulation. Each is called at most once per token, with the
// count the token was built with.
type Owner interface {
	ReturnPermits(n int64)
	ForgetPermits(n int64)
}

// Token holds permits acquired from a semaphore until Release or Forget.
//
// A Token cannot be forged: the only way to build one that returns permits to
// a semaphore is to acquire them from it, because a semaphore does not expose
// the Owner it builds its tokens with.
//
// The zero Token holds nothing; calling Release or Forget on it panics. A
// token for zero permits (from acquiring 0) can be released or forgotten once,
// like any other, and changes nothing.
//
// A Token must not be copied: each copy would carry the right to release the
// same permits, and only the first copy to be ended would be stopped from
// ending them again. go vet reports copies. Pass a *Token instead.
//
// Release and Forget are safe to call concurrently on one token: exactly one
// call succeeds and the others panic without effect.
type Token struct {
	_     noCopy
	owner Owner
	n     int64
	spent atomic.Bool
}

// New returns a live token for n permits held from owner. It is meant for
// semaphore implementations; the token gives its permits back only to owner.
func New(owner Owner, n int64) Token {
	return Token{owner: owner, n: n}
}

// Release gives the token's permits back to the semaphore that issued it,
// which may wake waiters that now fit. Afterwards the token is spent and
// Permits returns 0.
//
// It is a run-time error to call Release or Forget again on a spent token, or
// on the zero Token; the panic leaves the semaphore unchanged.
//
// Memory ordering: Release synchronizes before the return of the acquire
// that obtains the released permits.
func (t *Token) Release() {
	if t.end("Release") {
		t.owner.ReturnPermits(t.n)
	}
}

// Forget drops the token's permits for good: they are neither held nor
// available afterwards, and the semaphore's limit falls by the token's count
// (but not below zero). The limit stays lower until it is raised again, by
// TryRelease or SetLimit on the semaphore.
//
// It is a run-time error to call Release or Forget again on a spent token, or
// on the zero Token; the panic leaves the semaphore unchanged.
func (t *Token) Forget() {
	if t.end("Forget") {
		t.owner.ForgetPermits(t.n)
	}
}

// Permits returns the number of permits the token holds: the number acquired
// while the token is live, 0 once it has been released or forgotten, and 0
// for the zero Token.
func (t *Token) Permits() int64 {
	if t.owner == nil || t.spent.Load() {
		return 0
	}
	return t.n
}

// end marks the token spent and reports whether it holds permits to hand
// back. It panics, changing nothing, if the token was already spent or is the
// zero Token.
func (t *Token) end(op string) bool {
	if t.owner == nil {
		panic("token: " + op + " called on the zero Token")
	}
	hook.At(hook.BeforeTokenChange)
	if mutant.Active == mutant.DoubleRelease {
		t.spent.Store(true) // fault for scripts/mutants.sh: no check
		return t.n > 0
	}
	if !t.spent.CompareAndSwap(false, true) {
		panic("token: " + op + " called on a token that was already released or forgotten")
	}
	return t.n > 0
}

// noCopy makes go vet's copylocks check report copies of a Token.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}
