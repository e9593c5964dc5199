package keyed_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/keyed"
	"github.com/atomicsem/atomicsem/token"
)

// At the cap, a new key of a Limiter is taken whenever any entry of the
// table can be dropped, wherever it lies: here one of 1,000 keys at a
// time, made droppable by a reservation given back, 100 times over.
func TestLimiterFindsTheOneDroppableKeyAtTheCap(t *testing.T) {
	const maxKeys, trials = 1000, 100
	l := keyed.MustNewLimiter(0, 1, keyed.WithMaxKeys(maxKeys)) // rate 0: only a Release makes a key droppable
	toks := make([]*token.Token, maxKeys)
	for i := range toks {
		tok, ok := l.TryAcquire(fmt.Sprint("held-", i), 1)
		require.True(t, ok)
		toks[i] = &tok
	}
	_, ok := l.TryAcquire("one-too-many", 1)
	require.False(t, ok, "a table full of keys in use refuses a new key")
	refused := 0
	for i := range trials {
		toks[i].Release() // its key is full again, with nothing reserved
		tok, ok := l.TryAcquire(fmt.Sprint("new-", i), 1)
		if !ok {
			refused++
			continue
		}
		toks[i] = &tok
		_, present := l.Balance(fmt.Sprint("held-", i))
		require.False(t, present, "trial %d: the droppable key was dropped", i)
	}
	require.Zero(t, refused, "new keys refused of %d while one key could be dropped", trials)
	require.Equal(t, maxKeys, l.Len())
	for i := range toks {
		toks[i].Release()
	}
}

// The same when buckets fill by the passing of time alone: 1,000 keys
// spent a millisecond apart fill a millisecond apart, and each new key
// finds the one that just filled.
func TestLimiterFindsTheKeyThatFilledAtTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxKeys, trials = 1000, 100
		l := keyed.MustNewLimiter(1, 1, keyed.WithMaxKeys(maxKeys))
		for i := range maxKeys {
			require.True(t, l.TrySpend(fmt.Sprint("spent-", i), 1))
			time.Sleep(time.Millisecond)
		}
		// Key 0 fills 1 s after its spend, that is now; key i a
		// millisecond after key i−1.
		time.Sleep(time.Second - maxKeys*time.Millisecond)
		refused := 0
		for i := range trials {
			if !l.TrySpend(fmt.Sprint("new-", i), 1) {
				refused++
			}
			time.Sleep(time.Millisecond)
		}
		require.Zero(t, refused, "new keys refused of %d while one key could be dropped", trials)
		require.Equal(t, maxKeys, l.Len())
	})
}

// A key whose line of waiting spends has ended can be dropped once its
// bucket fills, and a new key at the cap finds it: the line's end lowers
// the key's due, which its line had put off for good.
func TestLimiterFindsAKeyWhoseLineEndedAtTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := keyed.MustNewLimiter(1, 1, keyed.WithMaxKeys(2))
		require.True(t, l.TrySpend("a", 1))
		require.True(t, l.TrySpend("b", 1))
		done := make(chan error, 1)
		go func() { done <- l.Spend(context.Background(), "a", 1) }() // a's line, served at 1 s
		time.Sleep(500 * time.Millisecond)
		require.False(t, l.TrySpend("c", 1), "both keys are mid-limit")
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		require.NoError(t, <-done) // a spent again at 1 s: full at 2 s; b full at 1 s
		time.Sleep(900 * time.Millisecond)
		require.True(t, l.TrySpend("c", 1), "b is full: c takes its place") // c full at 2.9 s
		time.Sleep(600 * time.Millisecond)
		require.True(t, l.TrySpend("d", 1), "at 2.5 s a, whose line has ended, is full")
		_, present := l.Balance("a")
		require.False(t, present)
		require.NoError(t, keyed.CheckDue(l))
	})
}
