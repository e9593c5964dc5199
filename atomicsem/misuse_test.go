package atomicsem_test

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

// copyToken copies a token the way a caller who ignores go vet's copylocks
// report would, without the report: through reflection.
func copyToken(src *token.Token) *token.Token {
	dst := new(token.Token)
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
	return dst
}

// panicOf runs f and returns what it panicked with, formatted, or "".
func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// requireMisusePanic checks that msg is a misuse panic in the semaphore's
// voice that names copying and concurrent ends as the likely causes.
func requireMisusePanic(t *testing.T, msg string) {
	t.Helper()
	require.True(t, strings.HasPrefix(msg, "atomicsem: "), "panic %q lacks the package prefix", msg)
	require.Contains(t, msg, "copied")
	require.Contains(t, msg, "two goroutines at once")
}

// requireServesNormally checks that, after a misuse, s is as it should be
// and serves parked acquirers in order: the queue, the free list of waiter
// records and the word are all intact.
func requireServesNormally(t *testing.T, s *atomicsem.Semaphore, want atomicsem.Stats) {
	t.Helper()
	require.Equal(t, want, s.Stats())
	require.Empty(t, atomicsem.QueueFlagsError(s))
	require.Empty(t, atomicsem.FreeListError(s))
	synctest.Test(t, func(t *testing.T) {
		var held []*token.Token
		for range want.Available {
			held = append(held, mustTake(t, s, 1))
		}
		var parked []*pendingAcquire
		for range 3 {
			parked = append(parked, park(t, s, t.Context(), 1))
		}
		for i, p := range parked {
			held[0].Release()
			synctest.Wait()
			requireGranted(t, p, 1)
			require.False(t, i+1 < len(parked) && parked[i+1].returned(), "one grant per release")
			held[0] = &p.tok
		}
		for _, tok := range held {
			tok.Release()
		}
	})
	require.Equal(t, want, s.Stats())
	require.Empty(t, atomicsem.FreeListError(s))
}

// Bug shape: a token granted to a parked Acquire owns that Acquire's
// pooled waiter record. Ending a copy of it after the original put the
// record back on the free list a second time (or while another Acquire was
// parked on it): two acquirers then shared one record and one event, the
// queue got a cycle, and unrelated waiters hung. The second end must panic
// with a message that names the cause, before it changes anything.
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
	awaitWaiters(t, s, 1)
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
