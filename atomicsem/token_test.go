package atomicsem_test

// The tokens the semaphore hands out: ending them part by part, and what
// ending one twice, or ending a copy, does to the semaphore.

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// Split works for every token the semaphore hands out: taken at once, or
// granted to a parked Acquire (whose waiter record the split gives back,
// once). Each part ends on its own, released or forgotten, and the
// semaphore accounts for each exactly.
func TestSplitTokensEndPartByPart(t *testing.T) {
	tests := []struct {
		name    string
		granted bool // the token comes from a parked Acquire's hand-off
	}{
		{name: "taken at once"},
		{name: "granted to a parked Acquire", granted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustNew(t, 10, 10)
			var whole *token.Token
			if tt.granted {
				p := grantedByHandOff(t, s, 10)
				whole = &p.tok
			} else {
				whole = mustTake(t, s, 10)
			}
			spent, ok := whole.Split(3)
			require.True(t, ok)
			require.Empty(t, atomicsem.FreeListError(s))
			back, ok := whole.Split(2)
			require.True(t, ok)
			require.Equal(t, []int64{5, 3, 2}, []int64{whole.Permits(), spent.Permits(), back.Permits()})

			spent.Forget()
			require.Equal(t, atomicsem.Stats{Available: 0, Held: 7, Limit: 7, Max: 10}, s.Stats())
			back.Release()
			require.Equal(t, atomicsem.Stats{Available: 2, Held: 5, Limit: 7, Max: 10}, s.Stats())
			whole.Release()
			require.Equal(t, atomicsem.Stats{Available: 7, Limit: 7, Max: 10}, s.Stats())
			require.Empty(t, atomicsem.FreeListError(s))
		})
	}
}

// Bug shape: a token granted to a parked Acquire owns that Acquire's
// pooled waiter record. Ending a copy of it after the original would put
// the record back on the free list a second time (or while another Acquire
// is parked on it): two acquirers would then share one record and one
// event, the queue would get a cycle, and unrelated waiters would hang. The
// second end must panic with a message that names the cause, before it
// changes anything.
func TestCopiedGrantedTokenEndedTwicePanicsAndCorruptsNothing(t *testing.T) {
	ends := map[string]func(*token.Token){
		"Release": (*token.Token).Release,
		"Forget":  (*token.Token).Forget,
		"Split":   func(tok *token.Token) { tok.Split(0) },
	}
	for firstName, first := range ends {
		for secondName, second := range ends {
			t.Run(firstName+"Then"+secondName, func(t *testing.T) {
				s := mustNew(t, 1, 1)
				p := grantedByHandOff(t, s, 1)
				dup := copyToken(&p.tok)
				first(&p.tok)
				if firstName == "Split" {
					p.tok.Release()
				}
				if firstName == "Forget" {
					require.True(t, s.TryRelease(1))
				}
				before := s.Stats()
				requireMisusePanic(t, panicOf(func() { second(dup) }))
				require.Equal(t, before, s.Stats(), "the refused end changed the semaphore")
				requireServesNormally(t, s, atomicsem.Stats{Available: 1, Limit: 1, Max: 1})
			})
		}
	}
}

// The same after the record has been reused: the copy is ended while
// another Acquire is parked on the record, which must go on being served.
func TestCopyEndedWhileItsRecordIsReusedPanics(t *testing.T) {
	s := mustNew(t, 1, 1)
	first := grantedByHandOff(t, s, 1)
	dup := copyToken(&first.tok)
	first.tok.Release() // the record goes back on the free list

	holder := mustTake(t, s, 1)
	second := goAcquire(t.Context(), s, 1) // parks on the recycled record
	awaitWaiters(s, 1)
	requireMisusePanic(t, panicOf(dup.Release))
	require.False(t, second.returned())
	require.Equal(t, atomicsem.Stats{Available: 0, Held: 1, Limit: 1, Max: 1, Waiters: 1}, s.Stats())
	holder.Release()
	second.waitFor(t)
	require.NoError(t, second.err)
	second.tok.Release()
	requireServesNormally(t, s, atomicsem.Stats{Available: 1, Limit: 1, Max: 1})
}

// Two goroutines ending copies of one granted token at once: exactly one
// end goes through, the other panics, and the semaphore is intact.
func TestConcurrentEndsOfAGrantedTokenPanicOnce(t *testing.T) {
	if raceEnabled {
		// The race build tracks each token with a cell that its ends
		// write, and reports two unordered ends of copies as a data race
		// on it before the semaphore sees them; this is the semaphore's
		// own defence, for the builds without that tracking.
		t.Skip("the race build reports concurrent ends of copies as a data race")
	}
	s := mustNew(t, 2, 2)
	for range 200 {
		other := mustTake(t, s, 1) // so that a doubled return would be accepted by the word
		p := grantedByHandOff(t, s, 1)
		copies := []*token.Token{&p.tok, copyToken(&p.tok)}
		var wg sync.WaitGroup
		msgs := make([]string, 2)
		start := make(chan struct{})
		for i, tok := range copies {
			wg.Go(func() {
				<-start
				msgs[i] = panicOf(tok.Release)
			})
		}
		close(start)
		wg.Wait()
		panicked := 0
		for _, msg := range msgs {
			if msg != "" {
				requireMisusePanic(t, msg)
				panicked++
			}
		}
		require.Equal(t, 1, panicked, "exactly one of two concurrent ends must be refused")
		require.Equal(t, atomicsem.Stats{Available: 1, Held: 1, Limit: 2, Max: 2}, s.Stats())
		other.Release()
	}
	requireServesNormally(t, s, atomicsem.Stats{Available: 2, Limit: 2, Max: 2})
}

// A copy of a token taken without parking returns to the semaphore, which
// cannot tell its permits from another holder's. Once its second end
// would return more than is held, it panics, naming copies as a cause, and
// changes nothing.
func TestCopiedTokenThatReturnsMoreThanIsHeldPanics(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := mustNew(t, 3, 3, opts...)
		tok := mustTake(t, s, 2)
		dups := []*token.Token{copyToken(tok), copyToken(tok)}
		tok.Release()
		for _, end := range []func(){dups[0].Release, dups[1].Forget} {
			requireMisusePanic(t, panicOf(end))
			require.Equal(t, atomicsem.Stats{Available: 3, Limit: 3, Max: 3}, s.Stats())
		}
	})
}

// A copy of a token taken on the fast path, ended after the original while
// another token is live, returns permits the semaphore cannot tell from the
// other token's: Held drops to 0 while that token still holds its permit.
// Under the race detector the token package tracks every token and panics
// at the copy's end, before anything changes.
func TestStaleCopyOfAFastPathTokenPanicsUnderRace(t *testing.T) {
	if !raceEnabled {
		t.Skip("the tracking of every token is the race build's")
	}
	eachMode(t, func(t *testing.T, opts []atomicsem.Option) {
		s := mustNew(t, 2, 2, opts...)
		tok := mustTake(t, s, 1)
		other := mustTake(t, s, 1)
		dup := copyToken(tok)
		tok.Release()
		for _, end := range []func(){dup.Release, dup.Forget} {
			msg := panicOf(end)
			require.True(t, strings.HasPrefix(msg, "token: "), "got %q", msg)
			require.Contains(t, msg, "copy")
			require.Equal(t, atomicsem.Stats{Available: 1, Held: 1, Limit: 2, Max: 2}, s.Stats())
		}
		other.Release()
	})
}
