package etcdsem

import (
	"context"
	"errors"
	"fmt"
	"math"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/atomicsem/atomicsem/semcontract"
)

// Moving the limit. TryRelease, Refill, SetLimit and Close change only the
// config key. Each is a compare-and-swap on the config's value as the handle
// last saw it, which takes one round trip while that is current, and one
// more each time another handle changed the config meanwhile (the
// transaction reads the config back when the compare fails). A call that
// changes nothing still makes its compare, so that its answer is the
// config's at one revision. The compare is on the value rather than the
// revision: a change of the limit depends only on what the config says,
// so a config changed and changed back serves as well. Waiters see the
// change through their watches on the config and grant themselves if it
// admits them.

// TryRelease adds n new permits, raising both the available count and the
// limit by n, and reports whether it did. It refuses, changing nothing, if
// the limit would exceed the maximum, counting permits held by tokens:
// ok is false and err nil. TryRelease(0) adds nothing and asks etcd
// nothing.
//
// On failure it returns false and ErrInvalidPermits if n < 0 or
// n > MaxPermits, ErrClosed after Close, or the errors of a round trip
// (ctx.Err(), ErrUnavailable, ErrSessionLost).
func (s *Semaphore) TryRelease(ctx context.Context, n int64) (ok bool, err error) {
	s.check("TryRelease", ctx)
	if n < 0 || n > MaxPermits {
		return false, fmt.Errorf("%w: TryRelease(%d)", ErrInvalidPermits, n)
	}
	if n == 0 {
		return false, nil
	}
	err = s.changeConfig(ctx, func(c config) (config, bool) {
		ok = !c.Closed && c.Limit+n <= c.Max
		c.Limit += n
		return c, ok
	})
	return ok && err == nil, err
}

// Refill adds up to n new permits, as many as the ceiling allows, and
// returns how many it added, counting permits held by tokens against the
// maximum as TryRelease does; n may be any size. Refill(0) adds nothing and
// asks etcd nothing.
//
// On failure it returns 0 and ErrInvalidPermits if n < 0, ErrClosed after
// Close, or the errors of a round trip.
func (s *Semaphore) Refill(ctx context.Context, n int64) (added int64, err error) {
	s.check("Refill", ctx)
	if n < 0 {
		return 0, fmt.Errorf("%w: Refill(%d)", ErrInvalidPermits, n)
	}
	if n == 0 {
		return 0, nil
	}
	err = s.changeConfig(ctx, func(c config) (config, bool) {
		added = 0
		if !c.Closed {
			added = min(n, c.Max-c.Limit)
		}
		c.Limit += added
		return c, added > 0
	})
	if err != nil {
		return 0, err
	}
	return added, nil
}

// SetLimit moves the live limit to limit in one step, for every handle.
// Raising it lets the waiters it admits grant themselves; lowering it
// revokes no token: Available drops, below zero if tokens hold more than
// the new limit, and acquirers wait until enough tokens come back.
//
// SetLimit returns ErrInvalidPermits if limit < 0, ErrExceedsMax if it is
// above the maximum, ErrClosed after Close, or the errors of a round trip;
// in each case nothing changes.
func (s *Semaphore) SetLimit(ctx context.Context, limit int64) error {
	s.check("SetLimit", ctx)
	if err := semcontract.CheckLimit(limit, s.max, ErrInvalidPermits, ErrExceedsMax); err != nil {
		return err
	}
	return s.changeConfig(ctx, func(c config) (config, bool) {
		if c.Closed {
			return c, false
		}
		change := c.Limit != limit
		c.Limit = limit
		return c, change
	})
}

// Close closes the semaphore for every handle. Every parked Acquire, on
// any handle, returns ErrClosed once its watch delivers the change, and
// later Acquire, TryAcquire, TryRelease, Refill and SetLimit calls fail with
// ErrClosed. Tokens already handed out may still be released or forgotten,
// so Stats keeps accounting for them, and WaitIdle still waits for them:
// Close, then WaitIdle, is a graceful shutdown of the fleet. Closing a
// closed semaphore does nothing and returns nil.
//
// Close returns the errors of a round trip if it could not make sure that
// the semaphore is closed.
func (s *Semaphore) Close(ctx context.Context) error {
	s.check("Close", ctx)
	err := s.changeConfig(ctx, func(c config) (config, bool) {
		change := !c.Closed
		c.Closed = true
		return c, change
	})
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// changeConfig applies change to the config as the handle last saw it and
// writes the result if change says so, as a compare-and-swap on the
// config's value, reading the config back and trying again until the
// compare holds. It returns ErrClosed if the semaphore is closed (without a
// round trip if the handle has seen it closed: closing is final); change
// has then been called on the closed config, so that its caller's answer
// is a refusal.
func (s *Semaphore) changeConfig(ctx context.Context, change func(config) (config, bool)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.alive(); err != nil {
		return err
	}
	c := s.cachedConfig()
	for {
		next, write := change(c)
		if c.Closed {
			return ErrClosed
		}
		var then []clientv3.Op
		if write {
			then = append(then, clientv3.OpPut(s.cfgKey, next.encode()))
		}
		rctx, cancel := s.rpcContext(ctx)
		resp, err := s.client.Txn(rctx).
			If(clientv3.Compare(clientv3.Value(s.cfgKey), "=", c.value)).
			Then(then...).
			Else(clientv3.OpGet(s.cfgKey)).
			Commit()
		cancel()
		if err != nil {
			return s.rpcError(ctx, err)
		}
		if resp.Succeeded {
			if write {
				next.value, next.mod = next.encode(), resp.Header.Revision
				s.noteConfig(next)
			}
			return nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return fmt.Errorf("%w: %q is missing", ErrForeignKeys, s.cfgKey)
		}
		if c, err = decodeConfig(s.cfgKey, kvs[0].Value, kvs[0].ModRevision); err != nil {
			return err
		}
		s.noteConfig(c)
	}
}

// TryForget takes n available permits out of circulation at once and
// reports whether it did: the available count and the limit both fall by
// n, as TryAcquire(n) followed by Forget on its token would leave them, but
// in one transaction and without a token. It returns the limit as it left
// it (as it found it, on a refusal), so that a caller that adds permits up
// to the maximum, as credit accrues, can see the room left: TryForget(0)
// takes nothing and only reads the limit.
//
// TryForget follows TryAcquire's rules: it refuses (ok false, err nil),
// changing nothing, when fewer than n permits are available or when it
// would take permits ahead of a waiter that the current limit admits, on
// any handle. Waiters that the rules admit ahead of it are granted in the
// same transaction. It takes two round trips, one to read and one to
// write, and one more for each change of another handle that comes
// between.
//
// On failure it returns false and ErrInvalidPermits if n < 0 or
// n > MaxPermits, ErrClosed after Close, or the errors of a round trip.
func (s *Semaphore) TryForget(ctx context.Context, n int64) (limit int64, ok bool, err error) {
	s.check("TryForget", ctx)
	if n < 0 || n > MaxPermits {
		return 0, false, fmt.Errorf("%w: TryForget(%d)", ErrInvalidPermits, n)
	}
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if err := s.alive(); err != nil {
		return 0, false, err
	}
	v, err := s.read(ctx)
	for {
		if err != nil {
			return 0, false, err
		}
		if v.cfg.Closed {
			return v.cfg.Limit, false, ErrClosed
		}
		if n == 0 {
			return v.cfg.Limit, true, nil
		}
		// The permits are an arrival's that is granted and forgotten at
		// once: it must be admitted, behind every waiter.
		me := &entry{n: n, create: math.MaxInt64}
		grantees := v.admitted(me)
		if len(grantees) == 0 || grantees[len(grantees)-1] != me {
			return v.cfg.Limit, false, nil
		}
		g := grantReq{
			cfg: v.cfg, grantees: grantees[:len(grantees)-1], holders: v.holders(),
			arrival: true, viewRev: v.rev, newLimit: v.cfg.Limit - n,
			orElse: []clientv3.Op{clientv3.OpGet(s.prefix, clientv3.WithPrefix())},
		}
		if len(g.grantees) >= grantBatch {
			// Serve those first, then look again.
			g.grantees, g.arrival = g.grantees[:grantBatch], false
		}
		var resp *clientv3.TxnResponse
		resp, err = s.grant(ctx, g)
		switch {
		case err != nil:
			return 0, false, s.rpcError(ctx, err)
		case resp.Succeeded && g.arrival:
			next := v.cfg
			next.Limit = g.newLimit
			next.value, next.mod = next.encode(), resp.Header.Revision
			s.noteConfig(next)
			return next.Limit, true, nil
		case resp.Succeeded:
			v, err = s.read(ctx)
		default:
			v, err = s.viewOf(resp.Header.Revision, resp.Responses[0].GetResponseRange().Kvs)
		}
	}
}
