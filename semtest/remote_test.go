package semtest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/semtest"
	"github.com/atomicsem/atomicsem/token"
)

// remoteSem is atomicsem behind the methods of a semaphore kept by a
// server: each call takes a context and returns an error, and the snapshot
// carries a field of its own.
type remoteSem struct{ s *atomicsem.Semaphore }

type remoteStats struct {
	semtest.Stats
	Calls int // what a server's snapshot adds
}

func (st remoteStats) Contract() semtest.Stats { return st.Stats }

func (r remoteSem) Acquire(ctx context.Context, n int64) (token.Token, error) {
	return r.s.Acquire(ctx, n)
}

func (r remoteSem) TryAcquire(ctx context.Context, n int64) (tok token.Token, ok bool, err error) {
	if n < 0 || n > r.s.Stats().Max {
		_, err = r.s.Acquire(ctx, n) // the refusal, with its error
		return
	}
	tok, ok = r.s.TryAcquire(n)
	return
}

func (r remoteSem) TryRelease(_ context.Context, n int64) (bool, error) {
	return r.s.TryRelease(n), nil
}

func (r remoteSem) Refill(_ context.Context, n int64) (int64, error) { return r.s.Refill(n), nil }

func (r remoteSem) SetLimit(_ context.Context, limit int64) error { return r.s.SetLimit(limit) }

func (r remoteSem) Close(context.Context) error { r.s.Close(); return nil }

func (r remoteSem) Stats(context.Context) (remoteStats, error) {
	return remoteStats{Stats: r.s.Stats()}, nil
}

func (r remoteSem) WaitIdle(ctx context.Context) error { return r.s.WaitIdle(ctx) }

// parkingSem adds what the suite needs to quiesce a semaphore outside a
// bubble: in FIFO mode a queued Acquire waits for a grant, so every waiter
// atomicsem counts is parked.
type parkingSem struct{ remoteSem }

func (p parkingSem) Parked(context.Context) (int, error) { return p.s.Stats().Waiters, nil }

// forgettingSem adds TryForget.
type forgettingSem struct{ parkingSem }

func (f forgettingSem) TryForget(_ context.Context, n int64) (int64, bool, error) {
	limit, ok := f.s.TryForget(n)
	return limit, ok, nil
}

// TestRemoteRunsTheSuite runs the suite, outside a bubble, against
// atomicsem seen through Remote, as a server's semaphore is: quiescing by
// polling Parked, refusals coming back as errors.
func TestRemoteRunsTheSuite(t *testing.T) {
	semtest.Run(t, func(t *testing.T, initial, max int64) (semtest.Semaphore, error) {
		s, err := atomicsem.New(initial, max)
		if err != nil {
			return nil, err
		}
		return semtest.Remote(t, forgettingSem{parkingSem{remoteSem{s}}}), nil
	}, semtest.Load(4, 50), semtest.Rounds(50))
}

// TestRemoteOffersWhatItsSemaphoreDoes requires the adapter to implement
// Forgetter and ParkCounter exactly when the semaphore it adapts has the
// methods behind them, so that the suite neither skips a check the
// semaphore supports nor calls a method it lacks.
func TestRemoteOffersWhatItsSemaphoreDoes(t *testing.T) {
	s := atomicsem.MustNew(1, 1)
	for _, tt := range []struct {
		name           string
		sem            semtest.Semaphore
		forgets, parks bool
	}{
		{"plain", semtest.Remote(t, remoteSem{s}), false, false},
		{"Parked", semtest.Remote(t, parkingSem{remoteSem{s}}), false, true},
		{"TryForget and Parked", semtest.Remote(t, forgettingSem{parkingSem{remoteSem{s}}}), true, true},
		{"TryForget", semtest.Remote(t, onlyForgetting{remoteSem{s}}), true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, forgets := tt.sem.(semtest.Forgetter)
			_, parks := tt.sem.(semtest.ParkCounter)
			require.Equal(t, tt.forgets, forgets, "Forgetter")
			require.Equal(t, tt.parks, parks, "ParkCounter")
			require.Equal(t, int64(1), tt.sem.Stats().Limit)
		})
	}
}

type onlyForgetting struct{ remoteSem }

func (f onlyForgetting) TryForget(_ context.Context, n int64) (int64, bool, error) {
	limit, ok := f.s.TryForget(n)
	return limit, ok, nil
}
