// Package token defines Token, the guard a semaphore hands out for the
// permits it grants.
//
// A Token is returned by value from an acquire and ends in exactly one of two
// ways: Release gives its permits back to the semaphore, Forget removes them
// for good (the semaphore's limit drops by that many). Split moves some of
// its permits into a new token, which ends on its own. Ending a token twice,
// or ending the zero Token, is a caller bug and panics.
package token

// Owner is what a Token returns its permits to. Semaphore implementations
// satisfy it; callers never need to.
//
// Each method receives the tag the token was issued with (see New), so
// that an owner that reuses itself for successive tokens can tell a
// current token from a stale copy of an earlier one.
//
// ReturnPermits makes n permits available again. ForgetPermits removes n
// permits from circulation. One of them is called at most once per token,
// with the token's count, which may be 0. SplitPermits is called when k of
// a live token's n permits (0 ≤ k ≤ n) move to a new token; it returns the
// owner and tag that both tokens carry from then on, so each of the two
// ends on its own. An owner with no bookkeeping of its own returns itself
// and tag.
type Owner interface {
	ReturnPermits(n int64, tag uint32)
	ForgetPermits(n int64, tag uint32)
	SplitPermits(n, k int64, tag uint32) (Owner, uint32)
}

// Token holds permits acquired from a semaphore until Release or Forget.
//
// A Token cannot be forged: the only way to build one that returns permits to
// a semaphore is to acquire them from it, because a semaphore does not expose
// the Owner it builds its tokens with.
//
// The zero Token holds nothing; calling Release, Forget or Split on it
// panics. A token for zero permits (from acquiring 0) can be released or
// forgotten once, like any other, and changes nothing.
//
// A Token must not be copied: each copy would carry the right to release the
// same permits, and only the first copy to be ended would be stopped from
// ending them again. Keep a token where it was returned, or take its
// address once and pass, store and send the pointer: a []*Token, a
// map[K]*Token or a chan *Token holds tokens without a copy (see the
// Pointers example). A function that acquires for its caller returns the
// acquire's result as it is (return sem.Acquire(ctx, n)).
//
// go vet reports most copies, in the words of its copylocks check, which
// takes a Token for a lock: a Token is not one, but its ownerTag field has
// the Lock and Unlock methods that check looks for (they do nothing), so
// that vet finds copies. It reports a Token assigned from a variable,
// passed or returned by value, put in a composite literal, appended,
// stored in a map, taken as a range variable, or read through a pointer,
// as
//
//	assignment copies lock value to t2: github.com/atomicsem/atomicsem/token.Token contains github.com/atomicsem/atomicsem/token.ownerTag
//
// It does not report a Token sent on a channel (ch <- tok), nor a Token
// returned straight from the call that made it. Under the race detector (go test -race),
// every token is tracked from its issue to its end, so ending a copy after
// the original (or the original after a copy) panics; in other builds a
// semaphore may still catch it (atomicsem does for tokens granted to a
// parked Acquire, and otherwise whenever the second end would return more
// permits than are held), but it cannot always tell a copy's permits from
// another holder's.
//
// A Token belongs to one goroutine at a time, like any Go value not
// documented as safe for concurrent use: it may be handed to another
// goroutine (through a channel, say) and ended there, but it must not be
// ended by two goroutines at once. That is a data race, which the race
// detector reports. The guard that catches a second end is a plain field,
// so that ending a token costs no atomic instruction beyond the semaphore's
// own.
type Token struct {
	owner Owner
	n     int64
	tag   ownerTag
	state state
}

// ownerTag is the value a Token passes back to its owner (v), and under the
// race detector the token's cell (see track_race.go). It is a struct
// with Lock and Unlock methods, the shape go vet's copylocks check looks
// for, so that vet reports copies of a Token (calling it a lock; see
// Token). (A zero-size marker field
// would do the same, but the compiler keeps a struct in registers only if
// it has at most four fields, and a token returned from every acquire must
// stay in registers to be cheap.) Its fields are declared in
// track_norace.go and track_race.go.

func (*ownerTag) Lock()   {}
func (*ownerTag) Unlock() {}

// state is where a Token is in its life.
type state uint8

const (
	zero  state = iota // the zero Token: issued by nobody
	live               // issued and not yet ended
	spent              // released or forgotten
)

// New returns a live token for n permits held from owner, carrying tag,
// which the token passes back to owner's methods unchanged. It is meant for
// semaphore implementations; the token gives its permits back only to
// owner.
//
// It is a run-time error to call New with a nil owner; the panic's message
// begins "token: ".
func New(owner Owner, n int64, tag uint32) Token {
	if owner == nil {
		panic("token: New called with a nil Owner")
	}
	return Token{owner: owner, n: n, tag: issue(tag), state: live}
}

// Empty returns a live token for zero permits that returns them to nobody:
// what a semaphore hands out for a request of 0. Ending it, or a token
// split from it, changes nothing anywhere.
func Empty() Token { return New(nobody{}, 0, 0) }

// nobody is the owner of the tokens Empty returns. It keeps no books, so
// it returns itself and the tag from SplitPermits.
type nobody struct{}

func (nobody) ReturnPermits(int64, uint32) {}
func (nobody) ForgetPermits(int64, uint32) {}
func (o nobody) SplitPermits(_, _ int64, tag uint32) (Owner, uint32) {
	return o, tag
}

// Split moves k of the token's permits into a new token and returns it: t
// keeps the rest, and each of the two is then released or forgotten on its
// own. A caller that reserved more than it turned out to need splits off
// what it used, forgets that part and releases the rest. Split(0) returns
// a token for nothing; Split(t.Permits()) leaves t holding nothing.
//
// Split reports false, changing nothing, if k < 0 or k is more than the
// token holds. It is a run-time error to call Split on a spent token, on
// the zero Token or on a nil *Token (or, under the race detector, on a copy
// of a token that has ended); the panic's message begins "token: ".
func (t *Token) Split(k int64) (Token, bool) {
	if t == nil || t.state != live {
		panic(splitMisuse(t.stateOrNil()))
	}
	t.checkIssued(splitMisuse(live))
	if k < 0 || k > t.n {
		return Token{}, false
	}
	t.owner, t.tag.v = t.owner.SplitPermits(t.n, k, t.tag.v)
	t.n -= k
	return New(t.owner, k, t.tag.v), true
}

// Permits returns the number of permits the token holds: the number acquired
// (less any split off) while the token is live, 0 once it has been released
// or forgotten, and 0 for the zero Token. It is a run-time error to call
// Permits on a nil *Token; the panic's message begins "token: ".
func (t *Token) Permits() int64 {
	if t == nil {
		panic("token: Permits called on a nil *Token")
	}
	if t.state != live {
		return 0
	}
	return t.n
}

// releaseMisuse, forgetMisuse and splitMisuse are what Release, Forget and
// Split panic with: the state of the token they were called on, nilToken
// for a nil *Token, or live for (under the race detector) a copy of a token
// that has ended. Each builds its message only when it is printed, and one
// type per method keeps the operation's name out of the call, so that
// Release and Forget stay small enough to be inlined. The panic value holds
// the state, not the token, so that a token does not escape to the heap
// through the panic its Release might raise.
type (
	releaseMisuse state
	forgetMisuse  state
	splitMisuse   state
)

func (m releaseMisuse) Error() string { return misuseMessage("Release", state(m)) }
func (m forgetMisuse) Error() string  { return misuseMessage("Forget", state(m)) }
func (m splitMisuse) Error() string   { return misuseMessage("Split", state(m)) }

// nilToken stands for a nil *Token in a misuse panic.
const nilToken state = 255

// stateOrNil returns t's state, or nilToken if t is nil.
func (t *Token) stateOrNil() state {
	if t == nil {
		return nilToken
	}
	return t.state
}

func misuseMessage(op string, s state) string {
	switch s {
	case nilToken:
		return "token: " + op + " called on a nil *Token"
	case zero:
		return "token: " + op + " called on the zero Token"
	case live:
		return "token: " + op + " called on a copy of a token that was already released or forgotten (pass and store *token.Token, never a copy)"
	}
	return "token: " + op + " called on a token that was already released or forgotten"
}
