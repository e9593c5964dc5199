//go:build !race

package token

// Outside the race detector a token carries only its owner's tag, and
// nothing is tracked: issuing and ending a token cost what they always did.

type ownerTag struct{ v uint32 }

// issue returns the tag of a new token.
func issue(v uint32) ownerTag { return ownerTag{v: v} }

// checkIssued does nothing outside the race detector.
func (t *Token) checkIssued(error) {}

// Release gives the token's permits back to the semaphore that issued it,
// which may wake waiters that now fit. Afterwards the token is spent and
// Permits returns 0.
//
// It is a run-time error to call Release or Forget again on a spent token, or
// on the zero Token (or, under the race detector, on a copy of a token that
// has ended); the panic, an error whose message begins "token: ", leaves the
// semaphore unchanged. Calling it on a nil *Token panics too, with the
// runtime's nil dereference, or under the race detector with a message that
// begins "token: ": a check here would take Release over the compiler's
// inlining budget.
//
// Memory ordering: Release synchronizes before the return of the acquire
// that obtains the released permits.
func (t *Token) Release() {
	if t.state != live {
		panic(releaseMisuse(t.state))
	}
	t.state = spent
	t.owner.ReturnPermits(t.n, t.tag.v)
}

// Forget drops the token's permits for good: they are neither held nor
// available afterwards, and the semaphore's limit falls by the token's count
// (but not below zero). The limit stays lower until it is raised again, by
// TryRelease, Refill or SetLimit on the semaphore.
//
// It is a run-time error to call Release or Forget again on a spent token, or
// on the zero Token (or, under the race detector, on a copy of a token that
// has ended); the panic, an error whose message begins "token: ", leaves the
// semaphore unchanged. A nil *Token panics as in Release.
func (t *Token) Forget() {
	if t.state != live {
		panic(forgetMisuse(t.state))
	}
	t.state = spent
	t.owner.ForgetPermits(t.n, t.tag.v)
}
