package keyed_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
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

// A new key that takes the room at the cap and is left full can itself be
// dropped for the next one, though every other key of its shard is held
// for good: it goes to the head of its shard's order, above them.
func TestLimiterFindsANewKeyLeftFullAtTheCap(t *testing.T) {
	const maxKeys, trials = 1000, 100
	l := keyed.MustNewLimiter(0, 1, keyed.WithMaxKeys(maxKeys)) // rate 0: only a Release makes a key droppable
	toks := make([]*token.Token, maxKeys)
	for i := range toks {
		tok, ok := l.TryAcquire(fmt.Sprint("held-", i), 1)
		require.True(t, ok)
		toks[i] = &tok
	}
	_, ok := l.TryAcquire("one-too-many", 1) // every key is looked at, and found held
	require.False(t, ok)
	refused := 0
	for i := range trials {
		toks[i].Release()
		// The released key makes room for a key left full...
		require.True(t, l.TrySpend(fmt.Sprint("full-", i), 0), "trial %d", i)
		// ...which is the one droppable key when the next comes.
		tok, ok := l.TryAcquire(fmt.Sprint("new-", i), 1)
		if !ok {
			refused++
			continue
		}
		toks[i] = &tok
		_, present := l.Balance(fmt.Sprint("full-", i))
		require.False(t, present, "trial %d: the key left full was dropped", i)
	}
	require.Zero(t, refused, "new keys refused of %d while the key left full could be dropped", trials)
	for _, tok := range toks {
		tok.Release()
	}
}

// After a Sweep, a new key at the cap still finds each key as it fills:
// the keys Sweep leaves are kept in order of the moment each fills, though
// they filled in another order than they came.
func TestLimiterFindsTheKeyThatFilledAfterASweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxKeys, burst = 1000, 1000
		l := keyed.MustNewLimiter(1000, burst, keyed.WithMaxKeys(maxKeys)) // a credit a millisecond
		// Key i is full again perm[i]+1 ms from now: in no order of i.
		perm := rand.New(rand.NewPCG(59, 1)).Perm(maxKeys)
		for i, p := range perm {
			require.True(t, l.TrySpend(fmt.Sprint("key-", i), int64(p+1)))
		}
		require.False(t, l.TrySpend("probe", burst), "no key is full yet") // and each key's moment is looked up
		time.Sleep(500*time.Millisecond + time.Microsecond)
		require.Equal(t, 500, l.Sweep(), "the keys full by 500 ms")
		for i := range 500 {
			require.True(t, l.TrySpend(fmt.Sprint("filler-", i), burst))
		}
		refused := 0
		for ms := 501; ms <= 600; ms++ {
			time.Sleep(time.Millisecond)
			if !l.TrySpend(fmt.Sprint("new-", ms), burst) {
				refused++
				continue
			}
			_, present := l.Balance(fmt.Sprint("key-", slices.Index(perm, ms-1)))
			require.False(t, present, "at %d ms: the key that filled was dropped", ms)
		}
		require.Zero(t, refused, "new keys refused of 100 while a key could be dropped")
		require.NoError(t, keyed.CheckDue(l))
	})
}
