package etcdsem

import (
	"context"
	"fmt"
	"math"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/atomicsem/atomicsem/token"
)

// grantBatch is the most waiters one grant transaction names. Each costs a
// compare and a put, and etcd refuses a transaction of more than 128
// operations unless it is configured otherwise; the waiters past the batch
// are granted by the next transaction.
const grantBatch = 32

// Acquire blocks until n permits are granted, then returns a token holding
// them. Acquiring 0 permits asks etcd only whether the semaphore is closed,
// and succeeds with a token for nothing.
//
// An Acquire where no key holds or waits takes one round trip, which
// writes the caller's key holding the permits. Otherwise it takes two: one
// writes the key waiting and reads the semaphore, the next grants the
// permits; a contended one watches, between the two, the keys whose change
// can admit it, until the rules do, and is often granted by the grant of a
// waiter ahead of it instead.
//
// On failure Acquire returns the zero Token, and deletes the key it wrote,
// leaving the semaphore as if it had not been called:
//   - ErrInvalidPermits if n < 0 or n > MaxPermits;
//   - ErrExceedsMax if n is larger than the semaphore's maximum;
//   - ctx.Err() if ctx is done before Acquire has the permits, even if
//     they were granted to it meanwhile: they are given back;
//   - ErrClosed if the semaphore is closed, or is closed while Acquire
//     waits (seen once the waiter's watch delivers the change);
//   - ErrSessionLost if the handle's session has ended, or ends while
//     Acquire waits (the key then goes with the lease);
//   - ErrUnavailable if a round trip does not finish in time, and
//     ErrForeignKeys if the prefix holds a key that is not a semaphore's.
//
// If the key cannot be deleted within the handle's timeout, the handle
// goes on deleting it in the background (see the package documentation);
// it holds back the waiters behind it no longer than the lease.
func (s *Semaphore) Acquire(ctx context.Context, n int64) (token.Token, error) {
	s.check("Acquire", ctx)
	h, err := s.acquire(ctx, n, false)
	if err != nil {
		return token.Token{}, err
	}
	return h.token(), nil
}

// AcquireFenced is Acquire for a caller that guards what the permits
// protect: with the token, it returns the token's Fence, which makes an
// etcd write conditional on the token still holding its permits and says
// when it no longer does (see Fence). It fails as Acquire does, and also
// returns ErrInvalidPermits for n = 0: a token for nothing has no key to
// fence with.
func (s *Semaphore) AcquireFenced(ctx context.Context, n int64) (token.Token, Fence, error) {
	s.check("AcquireFenced", ctx)
	if n == 0 {
		return token.Token{}, Fence{}, fmt.Errorf("%w: AcquireFenced(0) has nothing to fence", ErrInvalidPermits)
	}
	h, err := s.acquire(ctx, n, true)
	if err != nil {
		return token.Token{}, Fence{}, err
	}
	return h.token(), h.fence(), nil
}

// acquire is Acquire, and returns the owner of the token to make (nil for
// no permits); fenced asks for a loss signal on it.
func (s *Semaphore) acquire(ctx context.Context, n int64, fenced bool) (*holding, error) {
	if err := s.checkRequest(n); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.alive(); err != nil {
		return nil, err
	}
	if n == 0 {
		if err := s.checkOpen(ctx); err != nil {
			return nil, err
		}
		return nil, nil
	}
	key := s.newKey()
	w := &waiter{s: s, key: key, n: n, ctx: ctx, fenced: fenced}
	v, grantedAt, err := s.arrive(ctx, key, n)
	switch {
	case err != nil:
		return nil, err
	case grantedAt != 0:
		w.create = grantedAt
		return w.granted(grantedAt)
	}
	w.create = v.rev
	return w.wait(v)
}

// checkOpen is what Acquire(ctx, 0) and TryAcquire(ctx, 0) ask etcd: it
// returns ErrClosed if the semaphore is closed. Closing is final, so a
// closed config seen once needs no round trip.
func (s *Semaphore) checkOpen(ctx context.Context) error {
	if !s.cachedConfig().Closed {
		rctx, cancel := s.rpcContext(ctx)
		defer cancel()
		resp, err := s.client.Get(rctx, s.cfgKey)
		if err != nil {
			return s.rpcError(ctx, err)
		}
		if len(resp.Kvs) == 0 {
			return fmt.Errorf("%w: %q is missing", ErrForeignKeys, s.cfgKey)
		}
		c, err := decodeConfig(s.cfgKey, resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
		if err != nil {
			return err
		}
		s.noteConfig(c)
	}
	if s.cachedConfig().Closed {
		return ErrClosed
	}
	return nil
}

// arrive writes the caller's key for n permits, bound to the session's
// lease, in one round trip. Where no acquirer's key exists and n fits the
// limit, the key is written held and arrive returns the revision of that
// grant; otherwise it is written waiting, and arrive returns the
// semaphore's view at that revision.
//
// The key is written only while the config is the one the handle last saw,
// so that no key is ever written to a closed semaphore, and only while the
// handle's floor key is as the handle last saw it (see cleanUp). When
// either has moved on, the transaction reads both instead and arrive tries
// again.
func (s *Semaphore) arrive(ctx context.Context, key string, n int64) (_ *view, grantedAt int64, _ error) {
	for {
		c := s.cachedConfig()
		if c.Closed {
			return nil, 0, ErrClosed // closing is final
		}
		fast := n <= c.Limit // if nobody holds or waits, the rules admit n at once
		resp, err := s.arrival(ctx, key, n, c, s.floorMod.Load(), fast)
		if err != nil {
			// The key may have been written: take it out again.
			return nil, 0, s.cleanUp(ctx, key, s.rpcError(ctx, err))
		}
		if fast && resp.Succeeded {
			return nil, resp.Header.Revision, nil
		}
		inner := (*pb.TxnResponse)(resp)
		if fast {
			inner = resp.Responses[0].GetResponseTxn()
		}
		if inner.Succeeded {
			v, err := s.viewOf(resp.Header.Revision, inner.Responses[1].GetResponseRange().Kvs)
			if err != nil {
				return nil, 0, s.takeBack(ctx, key, resp.Header.Revision, err)
			}
			return v, 0, nil
		}
		if kvs := inner.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
			s.noteFloor(kvs[0].ModRevision)
		}
		kvs := inner.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return nil, 0, fmt.Errorf("%w: %q is missing", ErrForeignKeys, s.cfgKey)
		}
		c, err = decodeConfig(s.cfgKey, kvs[0].Value, kvs[0].ModRevision)
		if err != nil {
			return nil, 0, err
		}
		s.noteConfig(c)
	}
}

// arrival sends arrive's transaction for config c and the floor key's mod
// revision floor; fast asks for the grant where no acquirer's key exists.
func (s *Semaphore) arrival(ctx context.Context, key string, n int64, c config, floor int64, fast bool) (*clientv3.TxnResponse, error) {
	guard := []clientv3.Cmp{
		clientv3.Compare(clientv3.Value(s.cfgKey), "=", c.value),
		clientv3.Compare(clientv3.ModRevision(s.floor), "=", floor),
	}
	lease := clientv3.WithLease(s.session.Lease())
	waitThen := []clientv3.Op{clientv3.OpPut(key, entryValue(false, n), lease), clientv3.OpGet(s.prefix, clientv3.WithPrefix())}
	waitElse := []clientv3.Op{clientv3.OpGet(s.cfgKey), clientv3.OpGet(s.floor)}
	rctx, cancel := s.rpcContext(ctx)
	defer cancel()
	if !fast {
		return s.client.Txn(rctx).If(guard...).Then(waitThen...).Else(waitElse...).Commit()
	}
	return s.client.Txn(rctx).
		If(append(guard, clientv3.Compare(clientv3.Version(s.keyDir), "=", 0).WithPrefix())...).
		Then(clientv3.OpPut(key, entryValue(true, n), lease)).
		Else(clientv3.OpTxn(guard, waitThen, waitElse)).
		Commit()
}

// cleanUp takes back key, perhaps written by an Acquire or TryAcquire
// whose write failed on the client's side, and returns err, the reason
// the caller gives up. It is done even if the caller's context is done.
//
// A request that failed on the client's side may still reach etcd later,
// after the deletion meant to undo it, and leave a waiter that no one
// waits for. So cleanUp also rewrites the handle's floor key, under the
// session's lease, in the same transaction as the deletion: every write
// that creates an acquirer's key requires that the floor key's mod
// revision is the one its handle knew when it sent the write, so a write
// sent before the clean-up and applied after it is refused. The floor key
// is one per handle, made by the first clean-up, and goes with the
// session; no acquirer's key and no tombstone outlives the call that wrote
// it.
//
// The clean-up itself can land late: an attempt that failed on the
// client's side may be applied after the attempt that succeeded, once the
// name has been given back and a new key holds it. So each attempt is
// made only while the floor key is as the handle last knew it: the
// attempt that succeeds moves the floor key on, and every earlier attempt
// compared an older revision. An attempt that finds the floor key moved
// by another clean-up of the handle tries again from where it is now; the
// name is not given back until one has succeeded, so no key but this one
// can hold it meanwhile.
func (s *Semaphore) cleanUp(ctx context.Context, key string, err error) error {
	s.persist(ctx, fmt.Sprintf("taking back %q", key), func(ctx context.Context) error {
		for {
			floor := s.floorMod.Load()
			resp, err := s.client.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(s.floor), "=", floor)).
				Then(clientv3.OpPut(s.floor, "", clientv3.WithLease(s.session.Lease())), clientv3.OpDelete(key)).
				Else(clientv3.OpGet(s.floor)).
				Commit()
			if err != nil {
				return err
			}
			if resp.Succeeded {
				s.noteFloor(resp.Header.Revision)
				s.freeKey(key)
				return nil
			}
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 0 {
				// Made by an earlier clean-up and gone: only the lease's
				// end deletes it.
				return s.lostKey(s.floor)
			}
			s.noteFloor(kvs[0].ModRevision)
		}
	})
	return err
}

// takeBack deletes key, created at revision create, which an Acquire that
// gives up is known to have written, and returns err, the reason it gives
// up. A grant of the key still in flight compares the key's mod revision,
// so it cannot recreate it; and the deletion compares the key's create
// revision, so that an attempt applied late, once the name holds a new
// key, deletes nothing.
func (s *Semaphore) takeBack(ctx context.Context, key string, create int64, err error) error {
	s.persist(ctx, fmt.Sprintf("taking back %q", key), func(ctx context.Context) error {
		_, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", create)).
			Then(clientv3.OpDelete(key)).
			Commit()
		if err == nil {
			s.freeKey(key) // deleted now, or before by an earlier attempt
		}
		return err
	})
	return err
}

// noteFloor records m as the floor key's mod revision, unless a later one
// has been seen already.
func (s *Semaphore) noteFloor(m int64) {
	for {
		old := s.floorMod.Load()
		if m <= old || s.floorMod.CompareAndSwap(old, m) {
			return
		}
	}
}

// A grantReq is one grant transaction, computed from a view of the
// semaphore: the waiters it grants and, for TryAcquire and TryForget, the
// arrival it admits behind them.
type grantReq struct {
	cfg      config   // the view's config
	grantees []*entry // at most grantBatch waiters the view admits, from the first
	holders  []*entry // the keys holding in the view, for the grant's note
	// For an arrival admitted behind them: the view's revision; and the
	// key to create, held, for TryAcquire, or the limit to write into the
	// config, for TryForget.
	arrival  bool
	viewRev  int64
	newKey   string
	newN     int64
	newLimit int64
	floor    int64         // for a key it creates, the floor key's mod revision when the view was read
	orElse   []clientv3.Op // what the transaction runs if it does not commit
}

// grant makes the grant g in one transaction. It commits only if the
// config key's mod revision is still the view's, so that the limit has not
// moved and the semaphore has not closed since the view, and each
// grantee's key is unchanged, still waiting; the comment at admitted says
// why the grantees are then admitted at the commit's revision too.
//
// An arrival's place in line is the commit's revision, not the view's, so
// an arrival's grant also requires that no acquirer's key has been
// created since the view (one would be ahead of it, and the view did not
// weigh it); and a key it creates, that the handle's floor key is as the
// handle knew it (see cleanUp).
func (s *Semaphore) grant(ctx context.Context, g grantReq) (*clientv3.TxnResponse, error) {
	cmps := make([]clientv3.Cmp, 0, len(g.grantees)+3)
	ops := make([]clientv3.Op, 0, len(g.grantees)+1)
	cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.cfgKey), "=", g.cfg.mod))
	note := s.noteFor(g)
	for i, e := range g.grantees {
		value := entryValue(true, e.n)
		if note != nil {
			mine := *note
			mine.listed = mine.listed && i == len(g.grantees)-1
			if i+1 < len(g.grantees) {
				mine.next = g.grantees[i+1].create
			}
			value = s.grantValue(e.n, &mine)
		}
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(e.key), "=", e.mod))
		ops = append(ops, clientv3.OpPut(e.key, value, clientv3.WithIgnoreLease()))
	}
	if g.arrival {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.keyDir), "<", g.viewRev+1).WithPrefix())
		switch {
		case g.newKey != "":
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.floor), "=", g.floor))
			ops = append(ops, clientv3.OpPut(g.newKey, entryValue(true, g.newN), clientv3.WithLease(s.session.Lease())))
		default:
			next := g.cfg
			next.Limit = g.newLimit
			ops = append(ops, clientv3.OpPut(s.cfgKey, next.encode()))
		}
	}
	rctx, cancel := s.rpcContext(ctx)
	defer cancel()
	return s.client.Txn(rctx).If(cmps...).Then(ops...).Else(g.orElse...).Commit()
}

// noteFor returns the note that grant g writes into its grantees' keys,
// but for each grantee's next, or nil where it writes none: a grant that
// also moves the config leaves a note that no waiter could use. The list
// names the keys holding in
// g's view, the grantees but the last, and a key g creates held: no other
// key can hold once g commits (see admitted), and a key deleted since
// the view costs the waiter that reads the note a failed compare.
func (s *Semaphore) noteFor(g grantReq) *grantNote {
	if len(g.grantees) == 0 || (g.arrival && g.newKey == "") {
		return nil
	}
	note := &grantNote{cfgMod: g.cfg.mod}
	count := len(g.holders) + len(g.grantees) - 1
	if g.arrival {
		count++
	}
	if count > maxNoted {
		return note
	}
	note.listed = true
	note.holders = make([]*entry, 0, count)
	note.holders = append(note.holders, g.holders...)
	for _, e := range g.grantees[:len(g.grantees)-1] {
		note.holders = append(note.holders, &entry{key: e.key, n: e.n})
	}
	if g.arrival {
		note.holders = append(note.holders, &entry{key: g.newKey, n: g.newN})
	}
	return note
}

// lostKey returns the error for a key of the handle that etcd deleted: the
// lease ended, so the session is lost, or will be once the client hears.
func (s *Semaphore) lostKey(key string) error {
	if err := s.alive(); err != nil {
		return err
	}
	return fmt.Errorf("%w: %q was deleted, so its lease has ended", ErrSessionLost, key)
}

// TryAcquire takes n permits if the semaphore grants them now, without
// waiting, and reports whether it did. It follows Acquire's rules: it does
// not take permits ahead of a waiter that the current limit admits, on any
// handle. It takes one round trip where nobody holds or waits; otherwise
// two, one to read the semaphore and one to grant, and one more for each
// grant of another handle that comes between.
//
// ok is false with a nil error when the semaphore refuses for want of
// permits or for a waiter ahead. On failure, TryAcquire returns the zero
// Token, false and the reason: ErrInvalidPermits if n < 0 or n > MaxPermits,
// ErrExceedsMax if n is above the maximum, ErrClosed after Close, or the
// errors of a round trip as for Acquire. TryAcquire(0) succeeds unless the
// semaphore is closed.
func (s *Semaphore) TryAcquire(ctx context.Context, n int64) (token.Token, bool, error) {
	s.check("TryAcquire", ctx)
	if err := s.checkRequest(n); err != nil {
		return token.Token{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return token.Token{}, false, err
	}
	if err := s.alive(); err != nil {
		return token.Token{}, false, err
	}
	if n == 0 {
		if err := s.checkOpen(ctx); err != nil {
			return token.Token{}, false, err
		}
		return token.Empty(), true, nil
	}
	c := s.cachedConfig()
	if c.Closed || n > c.Limit {
		v, err := s.read(ctx)
		if err != nil {
			return token.Token{}, false, err
		}
		return s.tryFrom(ctx, n, v)
	}
	// Nobody holds or waits, as far as the handle knows: grant at once if
	// that is so, and read the semaphore otherwise, in one round trip.
	key := s.newKey()
	rctx, cancel := s.rpcContext(ctx)
	resp, err := s.client.Txn(rctx).
		If(
			clientv3.Compare(clientv3.Value(s.cfgKey), "=", c.value),
			clientv3.Compare(clientv3.Version(s.keyDir), "=", 0).WithPrefix(),
			clientv3.Compare(clientv3.ModRevision(s.floor), "=", s.floorMod.Load()),
		).
		Then(clientv3.OpPut(key, entryValue(true, n), clientv3.WithLease(s.session.Lease()))).
		Else(clientv3.OpGet(s.prefix, clientv3.WithPrefix())).
		Commit()
	cancel()
	if err != nil {
		return token.Token{}, false, s.cleanUp(ctx, key, s.rpcError(ctx, err))
	}
	if resp.Succeeded {
		return s.hold(key, n, resp.Header.Revision, resp.Header.Revision, false).token(), true, nil
	}
	s.freeKey(key) // not written
	v, err := s.viewOf(resp.Header.Revision, resp.Responses[0].GetResponseRange().Kvs)
	if err != nil {
		return token.Token{}, false, err
	}
	return s.tryFrom(ctx, n, v)
}

// tryFrom is TryAcquire from view v onwards.
func (s *Semaphore) tryFrom(ctx context.Context, n int64, v *view) (_ token.Token, _ bool, err error) {
	key := s.newKey()
	keep := false // the key is written, or cleanUp gives it back
	defer func() {
		if !keep {
			s.freeKey(key)
		}
	}()
	for {
		if v.cfg.Closed {
			return token.Token{}, false, ErrClosed
		}
		me := &entry{key: key, n: n, create: math.MaxInt64}
		grantees := v.admitted(me)
		if len(grantees) == 0 || grantees[len(grantees)-1] != me {
			return token.Token{}, false, nil
		}
		g := grantReq{
			cfg: v.cfg, grantees: grantees[:len(grantees)-1], holders: v.holders(),
			arrival: true, viewRev: v.rev, newKey: key, newN: n, floor: s.floorMod.Load(),
			orElse: []clientv3.Op{clientv3.OpGet(s.prefix, clientv3.WithPrefix())},
		}
		if len(g.grantees) >= grantBatch {
			// Serve those first, then look again.
			g.grantees, g.arrival = g.grantees[:grantBatch], false
		}
		resp, err := s.grant(ctx, g)
		if err != nil {
			err = s.rpcError(ctx, err)
			if g.arrival {
				keep = true
				err = s.cleanUp(ctx, key, err)
			}
			return token.Token{}, false, err
		}
		if resp.Succeeded && g.arrival {
			keep = true
			return s.hold(key, n, resp.Header.Revision, resp.Header.Revision, false).token(), true, nil
		}
		if resp.Succeeded {
			v, err = s.read(ctx)
		} else {
			v, err = s.viewOf(resp.Header.Revision, resp.Responses[0].GetResponseRange().Kvs)
		}
		if err != nil {
			return token.Token{}, false, err
		}
	}
}
