package etcdsem

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/token"
)

// hold returns the owner of the token for key, created at revision create,
// which holds n permits since revision granted; fenced asks for a loss
// signal on it (see Fence).
func (s *Semaphore) hold(key string, n, create, granted int64, fenced bool) *holding {
	h := &holding{s: s, key: key, create: create, granted: granted, mod: granted, n: n, parts: 1}
	if fenced {
		h.ctx, h.cancel = context.WithCancel(s.lossContext())
		go h.watchLoss()
	}
	return h
}

// watchLoss ends h.ctx, which closes the Fence's Done, once h's key is
// deleted or holds a key of another creation while h still holds: the
// holder has lost its permits without ending its token, so it must stop.
// Its own writes cannot look like that: the last part ends h.ctx before it
// deletes the key, and a partial release keeps the key's creation. It
// returns when h.ctx ends.
//
// It watches the key from the revision after the grant, so that no change
// since the grant is missed. A watch that ends while h holds (etcd
// compacted that revision, say) is replaced by a read of the key, and a
// watch from that read's revision on.
func (h *holding) watchLoss() {
	s := h.s
	from := h.granted + 1
	for {
		for resp := range s.client.Watch(h.ctx, h.key, clientv3.WithRev(from)) {
			if resp.Err() != nil {
				break
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete || ev.Kv.CreateRevision != h.create {
					h.cancel()
					return
				}
			}
		}
		backoff := minBackoff
		for {
			if h.ctx.Err() != nil {
				return
			}
			resp, err := s.client.Get(h.ctx, h.key)
			if err == nil {
				if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != h.create {
					h.cancel()
					return
				}
				from = resp.Header.Revision + 1
				break
			}
			select {
			case <-time.After(backoff):
			case <-h.ctx.Done():
				return
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// token returns the token for a holding that hold has just made, before
// any part has ended; for a nil h, the token for no permits.
func (h *holding) token() token.Token {
	if h == nil {
		return token.Empty()
	}
	return token.New(h, h.n, 0)
}

// holding is the owner of the tokens for one held key: the token an
// Acquire returned and the parts split from it. It tracks the permits the
// live parts hold together, which the key holds too: a part that ends
// lowers the key's weight, and the last part with permits deletes the key.
// Its round trips are made one at a time, under mu, so that two parts
// ended at once by two goroutines write the key's weight in order.
//
// Every write is a compare-and-swap, so that a write retried after a
// broken connection cannot be made twice, and an attempt that reaches etcd
// late cannot touch a later key of the same name: a write that lowers the
// weight compares the key's mod revision as the owner last wrote it, and
// the deletion compares its create revision. If an earlier attempt was
// made, the compare fails and the key shows it; a revision is never
// reused, so no later key matches either.
type holding struct {
	s       *Semaphore
	key     string
	create  int64              // the key's create revision
	granted int64              // the revision of the grant
	ctx     context.Context    // ends when the holding does; nil unless fenced
	cancel  context.CancelFunc // ends ctx; nil unless fenced

	mu    sync.Mutex
	mod   int64 // the key's mod revision, as last written or seen, guarded by mu
	n     int64 // permits the live parts hold, guarded by mu
	parts int   // live parts, guarded by mu
	gone  bool  // the key is deleted, guarded by mu
}

// errEndedTwice is what the owner panics with when a part ends that it does
// not know of: a copy of a token ended after the original.
const errEndedTwice = "etcdsem: a token was ended twice (was it copied, or ended by two goroutines at once?)"

// ReturnPermits implements token.Owner.
func (h *holding) ReturnPermits(n int64, _ uint32) { h.end(n, false) }

// ForgetPermits implements token.Owner.
func (h *holding) ForgetPermits(n int64, _ uint32) { h.end(n, true) }

// SplitPermits implements token.Owner: both parts keep returning to the
// same key, which holds the same weight as before.
func (h *holding) SplitPermits(_, _ int64, tag uint32) (token.Owner, uint32) {
	h.mu.Lock()
	h.parts++
	h.mu.Unlock()
	return h, tag
}

// end ends a part holding n permits, giving them back (forget false) or
// retiring them with the limit (forget true). Its round trip is retried
// while the connection is broken, for up to the handle's timeout in all;
// if it still fails, end returns and the handle goes on trying in the
// background (see persist).
func (h *holding) end(n int64, forget bool) {
	h.mu.Lock()
	if h.parts == 0 || n > h.n {
		h.mu.Unlock()
		panic(errEndedTwice)
	}
	h.parts--
	h.n -= n
	if h.parts == 0 && h.cancel != nil {
		h.cancel() // the caller is done with what the permits protect
	}
	unchanged := h.gone || (n == 0 && h.n > 0)
	h.mu.Unlock()
	s := h.s
	if unchanged || s.alive() != nil {
		return // nothing of the key's changes, or the key goes with the lease
	}
	s.persist(context.Background(), fmt.Sprintf("ending a token of %q", h.key), func(ctx context.Context) error {
		// Each attempt writes the key as the live parts leave it then, so
		// that two parts ended at once write the key's weight in order.
		h.mu.Lock()
		defer h.mu.Unlock()
		switch {
		case h.gone:
			return nil
		case forget && n > 0:
			return s.forget(ctx, h, n)
		}
		return h.write(ctx)
	})
}

// write leaves the key holding h.n permits: it deletes the key if h.n is
// 0, and lowers its weight otherwise, each compared as the holding's
// documentation says. It requires that h.mu is held.
func (h *holding) write(ctx context.Context) error {
	s := h.s
	if h.n == 0 {
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.create)).
			Then(clientv3.OpDelete(h.key)).
			Else(clientv3.OpGet(h.key)).
			Commit()
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
				// The name is not given back until the key is gone, so
				// no key of the handle's can hold it.
				return fmt.Errorf("%w: %q was created at revision %d, not %d by its owner", ErrForeignKeys, h.key, kvs[0].CreateRevision, h.create)
			}
		}
		h.markGone() // deleted now, or before: by an earlier attempt, or with the lease
		return nil
	}
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(h.key), "=", h.mod)).
		Then(clientv3.OpPut(h.key, entryValue(true, h.n), clientv3.WithIgnoreLease())).
		Else(clientv3.OpGet(h.key)).
		Commit()
	if err != nil {
		return err
	}
	if resp.Succeeded {
		h.mod = resp.Header.Revision
		return nil
	}
	return h.reconcile(resp.Responses[0].GetResponseRange().Kvs)
}

// markGone records that h's key is deleted, and gives its name back. It
// requires that h.mu is held.
func (h *holding) markGone() {
	if !h.gone {
		h.gone = true
		h.s.freeKey(h.key)
	}
}

// reconcile accounts for a compare on the key that failed: the key is gone
// (its lease ended, or an earlier attempt deleted it), or an earlier
// attempt of the same write was made; either way the write is done. Any
// other state of the key means that something other than its owner wrote
// it. It requires that h.mu is held.
func (h *holding) reconcile(kvs []*mvccpb.KeyValue) error {
	if len(kvs) == 0 {
		h.markGone()
		return nil
	}
	if e, _, err := parseEntry(h.key, kvs[0]); err != nil || !e.held || e.n != h.n {
		return fmt.Errorf("%w: %q holds %q, written by someone other than its owner", ErrForeignKeys, h.key, kvs[0].Value)
	}
	h.mod = kvs[0].ModRevision
	return nil
}

// keyOp is the write that leaves h's key holding h.n permits. It requires
// that h.mu is held.
func (h *holding) keyOp() clientv3.Op {
	if h.n == 0 {
		return clientv3.OpDelete(h.key)
	}
	return clientv3.OpPut(h.key, entryValue(true, h.n), clientv3.WithIgnoreLease())
}

// forget lowers the limit by n (not below zero) and h's key to h.n permits
// in one transaction, compared with the config's value as last seen and
// the key's mod revision, and retried with the config it reads back if
// only the config has moved on. It requires that h.mu is held.
func (s *Semaphore) forget(ctx context.Context, h *holding, n int64) error {
	c := s.cachedConfig()
	for {
		next := c
		next.Limit = max(0, c.Limit-n)
		resp, err := s.client.Txn(ctx).
			If(
				clientv3.Compare(clientv3.Value(s.cfgKey), "=", c.value),
				clientv3.Compare(clientv3.ModRevision(h.key), "=", h.mod),
			).
			Then(clientv3.OpPut(s.cfgKey, next.encode()), h.keyOp()).
			Else(clientv3.OpGet(s.cfgKey), clientv3.OpGet(h.key)).
			Commit()
		if err != nil {
			return err
		}
		if resp.Succeeded {
			next.value, next.mod = next.encode(), resp.Header.Revision
			s.noteConfig(next)
			h.mod = resp.Header.Revision
			if h.n == 0 {
				h.markGone()
			}
			return nil
		}
		if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 0 || kvs[0].ModRevision != h.mod {
			// The key is gone, with its permits, or an earlier attempt
			// was made.
			return h.reconcile(kvs)
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

// minBackoff and maxBackoff bound retry's pause between attempts.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = 200 * time.Millisecond
)

// retry runs op until it succeeds, fails for a reason other than a broken
// connection, or ctx ends. It is for round trips that are safe to repeat:
// a deletion, or a compare-and-swap that a first attempt, if made, makes
// fail.
func retry(ctx context.Context, op func(context.Context) error) error {
	backoff := minBackoff
	for {
		err := op(ctx)
		if err == nil || status.Code(err) != codes.Unavailable {
			return err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return err
		}
		backoff = min(2*backoff, maxBackoff)
	}
}
