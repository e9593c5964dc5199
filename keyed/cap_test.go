package keyed_test

import (
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
