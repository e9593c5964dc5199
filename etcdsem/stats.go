package etcdsem

import (
	"context"
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
