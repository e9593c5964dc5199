package semtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/atomicsem/atomicsem/semcontract"
	"github.com/atomicsem/atomicsem/token"
)

// RemoteSemaphore is a semaphore whose calls take a context and can fail on
// the way, as one kept by a server does (etcdsem.Semaphore, say). Its
// snapshot may carry more than Stats (a revision, say) and gives the
// contract's part of it through its Contract method. Remote adapts a
// RemoteSemaphore to Semaphore.
type RemoteSemaphore[S ContractStats] interface {
	Acquire(ctx context.Context, n int64) (token.Token, error)
	TryAcquire(ctx context.Context, n int64) (token.Token, bool, error)
	TryRelease(ctx context.Context, n int64) (bool, error)
	Refill(ctx context.Context, n int64) (int64, error)
	SetLimit(ctx context.Context, limit int64) error
	Close(ctx context.Context) error
	Stats(ctx context.Context) (S, error)
	WaitIdle(ctx context.Context) error
}

// ContractStats is a RemoteSemaphore's snapshot.
type ContractStats interface {
	// Contract returns the snapshot's Stats.
	Contract() Stats
}

// RemotePatience bounds each call that Remote's adapter makes for a
// method of Semaphore that takes no context.
const RemotePatience = 20 * time.Second

// Remote returns s as a Semaphore, so that the suite runs against a
// semaphore kept by a server in one line:
//
//	semtest.Run(t, func(t *testing.T, initial, max int64) (semtest.Semaphore, error) {
//		s, err := etcdsem.New(ctx, session, prefix(t), initial, max)
//		if err != nil {
//			return nil, err
//		}
//		return semtest.Remote(t, s), nil
//	}, semtest.Load(8, 25))
//
// The adapter gives each call that Semaphore makes without a context one
// bounded by RemotePatience. It answers a refusal the in-process semaphore
// answers with false or zero (an error matching semcontract.ErrClosed,
// ErrInvalidPermits or ErrExceedsMax) with false or zero, and fails t with
// any other error. The Semaphore it returns implements Forgetter if s has
// TryForget(ctx, n) (int64, bool, error), and ParkCounter if s has
// Parked(ctx) (int, error). It is a run-time error to pass a nil t or s;
// the panic's message begins "semtest: ".
func Remote[S ContractStats](t testing.TB, s RemoteSemaphore[S]) Semaphore {
	if t == nil {
		panic("semtest: Remote called with a nil testing.TB")
	}
	if s == nil {
		panic("semtest: Remote called with a nil RemoteSemaphore")
	}
	r := remote[S]{t: t, s: s}
	f, forgets := s.(remoteForgetter)
	p, parks := s.(remoteParkr)
	switch {
	case forgets && parks:
		return remoteForgetPark[S]{remoteForget[S]{r, f}, p}
	case forgets:
		return remoteForget[S]{r, f}
	case parks:
		return remotePark[S]{r, p}
	}
	return r
}

type remoteForgetter interface {
	TryForget(ctx context.Context, n int64) (int64, bool, error)
}

type remoteParkr interface {
	Parked(ctx context.Context) (int, error)
}

// remote adapts a RemoteSemaphore to Semaphore; the types below add the
// optional interfaces that the semaphore supports, so that the suite's type
// assertions see exactly those.
type remote[S ContractStats] struct {
	t testing.TB
	s RemoteSemaphore[S]
}

func (r remote[S]) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), RemotePatience)
}

// check fails the test with err unless it is nil or a refusal.
func (r remote[S]) check(op string, err error) {
	if err != nil && !errors.Is(err, semcontract.ErrClosed) &&
		!errors.Is(err, semcontract.ErrInvalidPermits) && !errors.Is(err, semcontract.ErrExceedsMax) {
		r.t.Errorf("semtest: %s: %v", op, err)
	}
}

func (r remote[S]) Acquire(ctx context.Context, n int64) (token.Token, error) {
	return r.s.Acquire(ctx, n)
}

func (r remote[S]) TryAcquire(n int64) (tok token.Token, ok bool) {
	ctx, cancel := r.ctx()
	defer cancel()
	var err error
	tok, ok, err = r.s.TryAcquire(ctx, n)
	r.check(fmt.Sprintf("TryAcquire(%d)", n), err)
	return
}

func (r remote[S]) TryRelease(n int64) bool {
	ctx, cancel := r.ctx()
	defer cancel()
	ok, err := r.s.TryRelease(ctx, n)
	r.check(fmt.Sprintf("TryRelease(%d)", n), err)
	return ok
}

func (r remote[S]) Refill(n int64) int64 {
	ctx, cancel := r.ctx()
	defer cancel()
	added, err := r.s.Refill(ctx, n)
	r.check(fmt.Sprintf("Refill(%d)", n), err)
	return added
}

func (r remote[S]) SetLimit(limit int64) error {
	ctx, cancel := r.ctx()
	defer cancel()
	err := r.s.SetLimit(ctx, limit)
	r.check(fmt.Sprintf("SetLimit(%d)", limit), err)
	return err
}

func (r remote[S]) Close() {
	ctx, cancel := r.ctx()
	defer cancel()
	r.check("Close", r.s.Close(ctx))
}

func (r remote[S]) Stats() Stats {
	ctx, cancel := r.ctx()
	defer cancel()
	st, err := r.s.Stats(ctx)
	r.check("Stats", err)
	if err != nil {
		return Stats{}
	}
	return st.Contract()
}

func (r remote[S]) WaitIdle(ctx context.Context) error { return r.s.WaitIdle(ctx) }

type remoteForget[S ContractStats] struct {
	remote[S]
	f remoteForgetter
}

// TryForget implements Forgetter.
func (r remoteForget[S]) TryForget(n int64) (int64, bool) {
	ctx, cancel := r.ctx()
	defer cancel()
	limit, ok, err := r.f.TryForget(ctx, n)
	r.check(fmt.Sprintf("TryForget(%d)", n), err)
	return limit, ok
}

type remotePark[S ContractStats] struct {
	remote[S]
	p remoteParkr
}

// Parked implements ParkCounter.
func (r remotePark[S]) Parked() int { return parkedOf(r.remote, r.p) }

type remoteForgetPark[S ContractStats] struct {
	remoteForget[S]
	p remoteParkr
}

// Parked implements ParkCounter.
func (r remoteForgetPark[S]) Parked() int { return parkedOf(r.remote, r.p) }

func parkedOf[S ContractStats](r remote[S], p remoteParkr) int {
	ctx, cancel := r.ctx()
	defer cancel()
	n, err := p.Parked(ctx)
	r.check("Parked", err)
	return n
}
