package etcdsem

import (
	"context"
	"errors"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// lingerFor is how long a handle keeps following the semaphore after its
// last parked Acquire returns. etcd's client closes the stream that
// carries a client's watches when the last of them ends, and opening it
// again takes round trips; lingering lets a run of contended acquires
// share one watch.
const lingerFor = time.Second

// errRetired is the error of a follower that stopped because no Acquire
// used it any more; no waiter ever sees it.
var errRetired = errors.New("etcdsem: follower retired")

// A follower keeps a handle's view of the semaphore current for the
// handle's parked Acquire calls, through one watch on the prefix that they
// share, run by a goroutine of its own. It starts when an Acquire first
// parks, and stops when the handle's session ends, when its watch cannot
// be restarted, or a moment after the last of its users leaves.
type follower struct {
	s     *Semaphore
	ready chan struct{}      // closed once the first view is in, or starting failed
	left  chan struct{}      // signals the goroutine that the last user left
	users int                // Acquire calls using it, guarded by s.mu
	stop  context.CancelFunc // ends the current watch; used by the goroutine only

	mu      sync.Mutex
	view    *view         // changed only by the goroutine, guarded by mu
	version uint64        // changes published so far, guarded by mu
	changed chan struct{} // closed at the next change or when the follower stops, guarded by mu
	err     error         // why the follower stopped; nil while it runs, guarded by mu
}

// follower returns the handle's follower, starting one if none runs, and
// counts the caller as a user until it calls leave. It waits for the
// follower's first view, or for ctx.
func (s *Semaphore) follower(ctx context.Context) (*follower, error) {
	s.mu.Lock()
	f := s.fol
	if f == nil {
		f = &follower{
			s:       s,
			ready:   make(chan struct{}),
			left:    make(chan struct{}, 1),
			changed: make(chan struct{}),
		}
		s.fol = f
		go f.run()
	}
	f.users++
	s.mu.Unlock()
	select {
	case <-f.ready:
	case <-ctx.Done():
		s.leave(f)
		return nil, ctx.Err()
	}
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		s.leave(f)
		return nil, err
	}
	return f, nil
}

// leave stops counting a caller of follower as a user.
func (s *Semaphore) leave(f *follower) {
	s.mu.Lock()
	f.users--
	last := f.users == 0
	s.mu.Unlock()
	if last {
		select {
		case f.left <- struct{}{}:
		default:
		}
	}
}

// run follows the semaphore: it starts a watch that lives as long as the
// session (or until the follower stops), reads the first view and closes
// ready, then applies the watch's events to the view, publishing each
// batch, until the follower stops. It makes its round trips on behalf of
// no caller in particular, each bounded by the handle's timeout.
func (f *follower) run() {
	s := f.s
	watch, err := f.restart()
	close(f.ready)
	if err != nil {
		return
	}
	defer func() { f.stop() }()
	var linger <-chan time.Time
	for {
		select {
		case resp, ok := <-watch:
			if !ok || resp.Err() != nil {
				// The watch ended (the client was closed, or the revision
				// it needs was compacted): follow afresh, or stop.
				f.stop()
				if watch, err = f.restart(); err != nil {
					f.stop = func() {}
					return
				}
				continue
			}
			var err error
			f.publish(func() { err = s.applyEvents(f.view, resp.Events) })
			if err != nil {
				f.finish(err)
				return
			}
		case <-f.left:
			linger = time.After(lingerFor)
		case <-linger:
			linger = nil
			if f.retire() {
				return
			}
		case <-s.session.Done():
			f.finish(s.Err())
			return
		}
	}
}

// restart starts a watch and publishes the view it carries on from, or
// stops the follower if it cannot.
func (f *follower) restart() (clientv3.WatchChan, error) {
	s := f.s
	ctx, cancel := context.WithTimeout(s.session.Ctx(), s.timeout)
	defer cancel()
	watch, stop, v, err := s.follow(ctx, s.session.Ctx(), nil)
	if err != nil {
		if s.alive() != nil {
			err = s.Err()
		}
		f.finish(err)
		return nil, err
	}
	f.stop = stop
	f.publish(func() { f.view = v })
	return watch, nil
}

// publish applies change to the view and tells the users.
func (f *follower) publish(change func()) {
	f.mu.Lock()
	change()
	f.version++
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// retire stops the follower if it has no users, and reports whether it
// did; the handle's next parked Acquire starts another.
func (f *follower) retire() bool {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if f.users > 0 {
		return false
	}
	if f.s.fol == f {
		f.s.fol = nil
	}
	f.mu.Lock()
	f.err = errRetired
	close(f.changed)
	f.mu.Unlock()
	return true
}

// finish stops the follower for err, which its users then see.
func (f *follower) finish(err error) {
	f.s.mu.Lock()
	if f.s.fol == f {
		f.s.fol = nil
	}
	f.s.mu.Unlock()
	f.mu.Lock()
	f.err = err
	close(f.changed)
	f.mu.Unlock()
}
