package etcdsem

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A Fence is what a token from AcquireFenced shows the resource its permits
// protect, so that the resource can refuse a holder that no longer holds.
//
// A holder can lose its permits without knowing it: its process pauses, or
// the network cuts it off from etcd, for longer than its session's lease;
// etcd deletes its key and grants the permits to the next in line, while
// the holder still thinks it holds them. Its client only hears of it later
// (its keep-alive must time out first), so no signal on the holder's side
// can close in time. The fence is therefore checked where the protected
// write is made:
//   - for data kept in etcd, IsHeld is a comparison to put in the write's
//     transaction: it holds while the token's key exists as granted, so a
//     stale holder's write fails;
//   - for anything else, Revision is a fencing value: the etcd revision of
//     the grant, which grows with every grant on the semaphore (holders
//     granted in one transaction share it); the resource remembers the
//     largest it has seen and refuses a smaller one.
//
// Done is the holder's own signal: it is closed when the token's last part
// is released or forgotten, when the handle's session ends, and when the
// handle sees the token's key deleted, or made anew, by anyone but the
// token (its handle watches the key while the token holds). It is a hint
// that comes late, never a guarantee: use it to stop work, and the fence
// to protect the data.
//
// The zero Fence fences nothing: its Done is nil and its IsHeld fails.
type Fence struct {
	key      string
	create   int64
	revision int64
	ctx      context.Context
}

// fence returns the Fence of h, which was made fenced.
func (h *holding) fence() Fence {
	return Fence{key: h.key, create: h.create, revision: h.granted, ctx: h.ctx}
}

// Revision returns the etcd revision at which the token was granted: a
// fencing value that no later grant on the semaphore makes smaller.
func (f Fence) Revision() int64 { return f.revision }

// Key returns the token's key in etcd.
func (f Fence) Key() string { return f.key }

// IsHeld returns a comparison that holds, in an etcd transaction, while the
// token's key exists as it was created: from its grant until it is
// released, forgotten, or deleted with its session's lease. It compares
// the key's create revision, which no later key under the same name
// shares, so a transaction that includes it commits only while the token
// holds.
func (f Fence) IsHeld() clientv3.Cmp {
	if f.key == "" {
		return clientv3.Compare(clientv3.Version("\x00etcdsem: the zero Fence"), ">", 0)
	}
	return clientv3.Compare(clientv3.CreateRevision(f.key), "=", f.create)
}

// Done returns a channel that is closed once the token no longer holds, as
// far as its handle knows: when its last part is released or forgotten,
// when its handle's session ends, or when its handle sees its key deleted
// or made anew while the token holds. It is nil for the zero Fence.
func (f Fence) Done() <-chan struct{} {
	if f.ctx == nil {
		return nil
	}
	return f.ctx.Done()
}
