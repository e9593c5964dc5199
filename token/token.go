// Package token defines Token, the guard a semaphore hands out for the
// permits it grants.
//
// A Token is returned by value from an acquire and ends in exactly one of two
// ways: Release gives its permits back to the semaphore, Forget removes them
// for good (the semaphore's limit drops by that many). Ending a token twice,
// or ending the zero Token, is a caller bug and panics.
package token

import "github.com/atomicsem/atomicsem/internal/mutant"

// Owner is what a Token returns its permits to. Semaphore implementations
// satisfy it; callers never need to.
//
// ReturnPermits makes n permits available again. ForgetPermits removes n
// permits from circulation. Each is called at most once per token, with the
// count the token was built with, which may be 0.
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
// A Token belongs to one goroutine at a time, like any Go value not
// documented as safe for concurrent use: it may be handed to another
// goroutine (through a channel, say) and ended there, but it must not be
// ended by two goroutines at once. That is a data race, which the race
// detector reports. The guard that catches a second end is a plain field,
// so that ending a token costs no atomic instruction beyond the semaphore's
// own.
type Token struct {
	_     noCopy
	owner Owner
	n     int64
	state state
}

// state is where a Token is in its life.
type state uint8

const (
	zero  state = iota // the zero Token: issued by nobody
	live               // issued and not yet ended
	spent              // released or forgotten
)

// New returns a live token for n permits held from owner. It is meant for
// semaphore implementations; the token gives its permits back only to owner.
func New(owner Owner, n int64) Token {
	return Token{owner: owner, n: n, state: live}
}

// Release gives the token's permits back to the semaphore that issued it,
// which may wake waiters that now fit. Afterwards the token is spent and
// Permits returns 0.
//
// It is a run-time error to call Release or Forget again on a spent token, or
// on the zero Token; the panic, an error whose message begins "token: ",
// leaves the semaphore unchanged.
//
// Memory ordering: Release synchronizes before the return of the acquire
// that obtains the released permits.
func (t *Token) Release() {
	if t.state != live {
		panic(releaseMisuse(t.state))
	}
	t.state = spent
	if mutant.Active == mutant.DoubleRelease {
		t.state = live // fault for scripts/mutants.sh: the token can end again
	}
	t.owner.ReturnPermits(t.n)
}

// Forget drops the token's permits for good: they are neither held nor
// available afterwards, and the semaphore's limit falls by the token's count
// (but not below zero). The limit stays lower until it is raised again, by
// TryRelease or SetLimit on the semaphore.
//
// It is a run-time error to call Release or Forget again on a spent token, or
// on the zero Token; the panic, an error whose message begins "token: ",
// leaves the semaphore unchanged.
func (t *Token) Forget() {
	if t.state != live {
		panic(forgetMisuse(t.state))
	}
	t.state = spent
	if mutant.Active == mutant.DoubleRelease {
		t.state = live // fault for scripts/mutants.sh: the token can end again
	}
	t.owner.ForgetPermits(t.n)
}

// Permits returns the number of permits the token holds: the number acquired
// while the token is live, 0 once it has been released or forgotten, and 0
// for the zero Token.
func (t *Token) Permits() int64 {
	if t.state != live {
		return 0
	}
	return t.n
}

// releaseMisuse and forgetMisuse are what Release and Forget panic with: the
// state of the token they were called on. They build their message only when
// it is printed, which keeps both methods small enough to be inlined. (For
// the same reason the two methods spell out their check rather than share a
// helper: even inlined, a helper's call takes them past the budget, cost 83
// of 80.)
type (
	releaseMisuse state
	forgetMisuse  state
)

func (m releaseMisuse) Error() string { return misuseMessage("Release", state(m)) }
func (m forgetMisuse) Error() string  { return misuseMessage("Forget", state(m)) }

func misuseMessage(op string, s state) string {
	if s == zero {
		return "token: " + op + " called on the zero Token"
	}
	return "token: " + op + " called on a token that was already released or forgotten"
}

// noCopy makes go vet's copylocks check report copies of a Token.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}
