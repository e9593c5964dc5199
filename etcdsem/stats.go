package etcdsem

import (
	"context"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/atomicsem/atomicsem/semcontract"
)

// Stats is a snapshot of a semaphore's state at one etcd revision.
type Stats struct {
	Available int64 // permits free now; negative while the limit is below Held
	Held      int64 // permits held by live tokens, on every handle
	Limit     int64 // the live limit: Available + Held
	Max       int64 // the ceiling fixed when the semaphore was created
	Waiters   int   // acquirers waiting, on every handle
	Closed    bool
	Revision  int64 // the etcd revision the snapshot was read at
}

// Contract returns the snapshot without its revision, as the Stats that
// every implementation of the semaphore contract shares (atomicsem.Stats
// is the same type), for code written against the contract: package
// semtest's Remote adapter, say.
func (st Stats) Contract() semcontract.Stats {
	return semcontract.Stats{
		Available: st.Available, Held: st.Held, Limit: st.Limit, Max: st.Max,
		Waiters: st.Waiters, Closed: st.Closed,
	}
}

// Stats returns a snapshot of the semaphore read in one round trip, at one
// revision, so that its fields are consistent with each other. Waiters
// counts the acquirers whose keys wait, which includes, for a moment, an
// uncontended Acquire between its two round trips, and a waiter whose
// handle has not yet seen that the semaphore was closed.
//
// On failure Stats returns the zero Stats and the errors of a round trip
// (ctx.Err(), ErrUnavailable, ErrSessionLost), or ErrForeignKeys.
func (s *Semaphore) Stats(ctx context.Context) (Stats, error) {
	s.check("Stats", ctx)
	if err := ctx.Err(); err != nil {
		return Stats{}, err
	}
	v, err := s.read(ctx)
	if err != nil {
		return Stats{}, err
	}
	held := v.held()
	return Stats{
		Available: v.cfg.Limit - held,
		Held:      held,
		Limit:     v.cfg.Limit,
		Max:       v.cfg.Max,
		Waiters:   v.waiters(),
		Closed:    v.cfg.Closed,
		Revision:  v.rev,
	}, nil
}

// WaitIdle blocks until no permits are held on any handle, or ctx is done.
// It returns nil at once if none are held now; otherwise it watches the
// semaphore and returns nil at the first revision at which none are held,
// whatever the limit, and ctx.Err() if ctx is done first. A token whose
// session ends stops counting once etcd deletes its key.
//
// WaitIdle takes no permits and blocks no acquirer: permits acquired while
// it waits delay it until they come back too. It works on a closed
// semaphore: Close, then WaitIdle, is a graceful shutdown that lets every
// holder in the fleet finish.
//
// WaitIdle called with a context that is already done still reads the
// semaphore once, and returns nil if nothing is held, ctx.Err() otherwise.
// It returns the errors of a round trip (ErrUnavailable, ErrSessionLost)
// if it cannot read the semaphore.
func (s *Semaphore) WaitIdle(ctx context.Context) error {
	s.check("WaitIdle", ctx)
	if err := ctx.Err(); err != nil {
		// Nothing held means nothing to wait for, whatever ctx says: ask.
		dctx, cancel := s.detachedContext(ctx)
		defer cancel()
		if v, rerr := s.read(dctx); rerr == nil && v.held() == 0 {
			return nil
		}
		return err
	}
	v, err := s.read(ctx)
	if err != nil {
		return err
	}
	for v.held() > 0 {
		if v, err = s.watchUntilIdle(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

// watchUntilIdle follows the semaphore from view v until no permits are
// held, and returns the view that says so; or, if its watch ends, the view
// it has, for WaitIdle to look at again.
func (s *Semaphore) watchUntilIdle(ctx context.Context, v *view) (*view, error) {
	watch, stop, v, err := s.follow(ctx, ctx, v)
	if err != nil {
		return nil, err
	}
	defer stop()
	for v.held() > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case resp, ok := <-watch:
			if !ok || resp.Err() != nil {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				return s.read(ctx)
			}
			if err := s.applyEvents(v, resp.Events); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// Parked returns the number of Acquire calls waiting on this handle that
// have seen every change to what they watch and wait for the next: each
// has its context live and no timer of its own running, and the keys it
// watches (the config, and the waiter ahead of it or the holders) are as
// its view has them, at exactly the revisions that a fresh read finds. Such
// a call has found itself not admitted, and nothing that could admit it has
// changed since. It reads the prefix once.
//
// It is for test harnesses that must know when a semaphore they cannot run
// in a testing/synctest bubble is quiescent (semtest.ParkCounter, which
// semtest.Remote provides from this method). On failure it returns 0 and
// the errors of a round trip.
func (s *Semaphore) Parked(ctx context.Context) (int, error) {
	s.check("Parked", ctx)
	rctx, cancel := s.rpcContext(ctx)
	defer cancel()
	resp, err := s.client.Get(rctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, s.rpcError(ctx, err)
	}
	now := make(map[string]int64, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if !strings.HasPrefix(string(kv.Key), s.prefix+floorDir) {
			now[string(kv.Key)] = kv.ModRevision
		}
	}
	s.mu.Lock()
	waiters := make([]*waiter, 0, len(s.parked))
	for w := range s.parked {
		waiters = append(waiters, w)
	}
	s.mu.Unlock()
	count := 0
	for _, w := range waiters {
		w.mu.Lock()
		v := w.view
		ok := w.idle && w.ctx.Err() == nil && v != nil && now[s.cfgKey] == v.cfg.mod
		for _, key := range w.watched[min(1, len(w.watched)):] { // the config's first
			var mod int64
			if e := v.entries[key]; e != nil {
				mod = e.mod
			}
			ok = ok && now[key] == mod
		}
		w.mu.Unlock()
		if ok {
			count++
		}
	}
	return count, nil
}
