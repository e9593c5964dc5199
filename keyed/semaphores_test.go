package keyed_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/keyed"
	"github.com/atomicsem/atomicsem/token"
)

func TestSemaphoresKeysAreIndependent(t *testing.T) {
	s, err := keyed.NewSemaphores(2)
	require.NoError(t, err)
	a1, ok := s.TryAcquire("a", 2)
	require.True(t, ok)
	_, ok = s.TryAcquire("a", 1)
	require.False(t, ok, "a holds its limit")
	b1, ok := s.TryAcquire("b", 2)
	require.True(t, ok, "b has a limit of its own")
	a1.Release()
	a2, ok := s.TryAcquire("a", 1)
	require.True(t, ok)
	a2.Release()
	b1.Release()
}

func TestSemaphoresAcquireWaitsForRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := keyed.NewSemaphores(1)
		require.NoError(t, err)
		held, err := s.Acquire(t.Context(), "k", 1)
		require.NoError(t, err)
		done := make(chan *token.Token, 1)
		go func() {
			tok, err := s.Acquire(context.Background(), "k", 1)
			if err == nil {
				done <- &tok
			}
		}()
		synctest.Wait()
		require.Empty(t, done, "the second acquire waits")
		require.Zero(t, s.Sweep(), "a key waited on is not dropped")
		st, ok := s.KeyStats("k")
		require.True(t, ok)
		require.Equal(t, 1, st.Waiters)
		held.Release()
		synctest.Wait()
		tok := <-done
		tok.Release()
		require.Equal(t, 1, s.Sweep(), "the key is idle again")
		require.Zero(t, s.Len())
	})
}

func TestSemaphoresCancelledAcquireLeavesKeyIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := keyed.NewSemaphores(1)
		require.NoError(t, err)
		held, ok := s.TryAcquire("k", 1)
		require.True(t, ok)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err = s.Acquire(ctx, "k", 1)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		held.Release()
		require.Equal(t, 1, s.Sweep())
	})
}

func TestSemaphoresSetLimitAllAndOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := keyed.NewSemaphores(1, keyed.WithMaxLimit(4))
		require.NoError(t, err)
		a, ok := s.TryAcquire("a", 1)
		require.True(t, ok)
		got := make(chan error, 1)
		go func() {
			tok, err := s.Acquire(context.Background(), "a", 2)
			if err == nil {
				tok.Release()
			}
			got <- err
		}()
		synctest.Wait()
		require.Empty(t, got, "2 is above a's limit of 1")
		require.NoError(t, s.SetLimit(3))
		synctest.Wait()
		require.NoError(t, <-got, "raising the shared limit admits the waiter")

		require.NoError(t, s.SetKeyLimit("b", 4))
		require.NoError(t, s.SetLimit(2))
		st, _ := s.KeyStats("b")
		require.EqualValues(t, 4, st.Limit, "SetLimit leaves a key's own limit alone")
		st, _ = s.KeyStats("a")
		require.EqualValues(t, 2, st.Limit)
		st, _ = s.KeyStats("new")
		require.EqualValues(t, 2, st.Limit, "a new key gets the shared limit")
		a.Release()
		require.Equal(t, 1, s.Sweep(), "b keeps its own limit, a goes")
		s.ResetKeyLimit("b")
		st, _ = s.KeyStats("b")
		require.EqualValues(t, 2, st.Limit)
		require.Equal(t, 1, s.Sweep())
	})
}

func TestSemaphoresForgetKeepsKey(t *testing.T) {
	s, err := keyed.NewSemaphores(3)
	require.NoError(t, err)
	tok, ok := s.TryAcquire("k", 1)
	require.True(t, ok)
	tok.Forget()
	require.Zero(t, s.Sweep(), "a key whose limit a Forget lowered is not new")
	st, _ := s.KeyStats("k")
	require.EqualValues(t, 2, st.Limit)
}

func TestSemaphoresCapRefusesNewKeyWhileAllAreHeld(t *testing.T) {
	s, err := keyed.NewSemaphores(1, keyed.WithMaxKeys(3))
	require.NoError(t, err)
	var toks []*token.Token
	for _, k := range []string{"a", "b", "c"} {
		tok, ok := s.TryAcquire(k, 1)
		require.True(t, ok)
		toks = append(toks, &tok)
	}
	_, ok := s.TryAcquire("d", 1)
	require.False(t, ok, "the table is full of keys in use")
	_, err = s.Acquire(t.Context(), "d", 1)
	require.ErrorIs(t, err, keyed.ErrTooManyKeys)
	require.ErrorIs(t, s.SetKeyLimit("d", 1), keyed.ErrTooManyKeys)
	for _, k := range []string{"a", "b", "c"} {
		_, ok := s.TryAcquire(k, 1)
		require.False(t, ok, "key %s keeps its limit", k)
	}
	toks[1].Release()
	d, ok := s.TryAcquire("d", 1)
	require.True(t, ok, "an idle key makes room")
	require.Equal(t, 3, s.Len())
	d.Release()
	toks[0].Release()
	toks[2].Release()
}

func TestSemaphoresBadInput(t *testing.T) {
	_, err := keyed.NewSemaphores(-1)
	require.ErrorIs(t, err, atomicsem.ErrInvalidPermits)
	_, err = keyed.NewSemaphores(2, keyed.WithMaxLimit(1))
	require.ErrorIs(t, err, atomicsem.ErrInvalidPermits)
	_, err = keyed.NewSemaphores(1, keyed.WithMaxKeys(0))
	require.ErrorIs(t, err, keyed.ErrInvalidMaxKeys)
	for _, max := range []int64{-5, -1} {
		s, err := keyed.NewSemaphores(0, keyed.WithMaxLimit(max))
		require.ErrorIs(t, err, atomicsem.ErrInvalidPermits, "WithMaxLimit(%d)", max)
		require.Nil(t, s)
		_, err = keyed.NewSemaphores(5, keyed.WithMaxLimit(max))
		require.ErrorIs(t, err, atomicsem.ErrInvalidPermits, "WithMaxLimit(%d)", max)
	}

	s, err := keyed.NewSemaphores(2)
	require.NoError(t, err)
	tests := []struct {
		n    int64
		want error
	}{
		{-1, atomicsem.ErrInvalidPermits},
		{3, atomicsem.ErrExceedsMax},
		{atomicsem.MaxPermits + 1, atomicsem.ErrInvalidPermits},
	}
	for _, tt := range tests {
		_, err := s.Acquire(t.Context(), "k", tt.n)
		require.ErrorIs(t, err, tt.want, "Acquire(%d)", tt.n)
		_, ok := s.TryAcquire("k", tt.n)
		require.False(t, ok, "TryAcquire(%d)", tt.n)
	}
	require.ErrorIs(t, s.SetLimit(3), atomicsem.ErrExceedsMax)
	require.ErrorIs(t, s.SetLimit(-1), atomicsem.ErrInvalidPermits)
	require.ErrorIs(t, s.SetKeyLimit("k", 3), atomicsem.ErrExceedsMax)
	require.Zero(t, s.Len(), "bad input makes no entry")
	st, _ := s.KeyStats("k")
	require.EqualValues(t, 2, st.Limit)
}

func TestSemaphoresConcurrentKeysRace(t *testing.T) {
	s, err := keyed.NewSemaphores(2, keyed.WithMaxKeys(8))
	require.NoError(t, err)
	var inUse [16]int32
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 2000 {
				k := r.IntN(16)
				key := fmt.Sprint(k)
				tok, err := s.Acquire(context.Background(), key, 1)
				if errors.Is(err, keyed.ErrTooManyKeys) {
					continue
				}
				require.NoError(t, err)
				mu.Lock()
				inUse[k]++
				over := inUse[k] > 2
				mu.Unlock()
				require.False(t, over, "key %d over its limit", k)
				mu.Lock()
				inUse[k]--
				mu.Unlock()
				tok.Release()
				if r.IntN(50) == 0 {
					s.Sweep()
				}
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, s.Len(), 8)
	s.Sweep()
	require.Zero(t, s.Len())
}
