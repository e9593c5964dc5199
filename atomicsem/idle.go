package atomicsem

import (
	"context"

	"github.com/atomicsem/atomicsem/internal/hook"
)

// idleWaiters are the WaitIdle calls parked until no permit is held, each
// on a channel of its own, closed to wake it. All of it is guarded by the
// semaphore's mu. While any is parked, the word's idle flag is set, and
// every change that would bring held to zero is made under mu, where it
// clears the flag and wakes them all (wakeIdleLocked). A release that
// leaves permits held, or any release while nobody waits for idle, never
// looks further than the word.
//
// A channel per call, rather than one shared by all, keeps each channel in
// the testing/synctest bubble of the goroutine that waits on it.
type idleWaiters struct {
	chans []chan struct{}
}

// WaitIdle blocks until no permits are held, or ctx is done. It returns nil
// at once if none are held now; otherwise it returns nil as soon as the
// last token out is released or forgotten, whatever the limit, and
// ctx.Err() if ctx is done first (nil if both have happened by the time it
// looks).
//
// WaitIdle takes no permits and blocks no acquirer: permits acquired while
// it waits delay it until they come back too. Any number of goroutines may
// wait at once. It works on a closed semaphore, whose tokens may still be
// out: Close, then WaitIdle, is a graceful shutdown that lets every holder
// finish. (The x/sync idiom of acquiring the maximum instead hangs while
// the limit is lowered below the maximum, and takes the permits it waits
// for.)
//
// Memory ordering: the release or forget that leaves no permit held
// synchronizes before the return of the WaitIdle calls it ends.
func (s *Semaphore) WaitIdle(ctx context.Context) error {
	if s == nil {
		panic(nilSemaphore("WaitIdle"))
	}
	if ctx == nil {
		panic(nilContext("WaitIdle"))
	}
	s.made()
	if s.load().Held() == 0 {
		return nil
	}
	if s.cache == nil {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	if s.cache != nil {
		// The word counts cached permits as held: they go back to it,
		// and the stripes stay off while WaitIdle waits, before anything
		// is decided, so that an idle semaphore answers nil whatever ctx
		// says.
		s.drainLocked()
		if err := ctx.Err(); err != nil && s.load().Held() != 0 {
			s.mu.Unlock()
			return err
		}
	}
	for {
		old := s.load()
		if old.Held() == 0 {
			s.mu.Unlock()
			return nil
		}
		hook.At(hook.BeforeCAS)
		if old.Idle() || s.cas(old, old.WithIdle(true)) {
			break
		}
	}
	ch := make(chan struct{})
	s.idle.chans = append(s.idle.chans, ch)
	s.mu.Unlock()

	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-ch:
		return nil // woken meanwhile: the semaphore was idle
	default:
	}
	s.idle.remove(ch)
	if len(s.idle.chans) == 0 {
		// Nobody waits any more: clear the flag, so that releases stop
		// coming to the lock for it.
		for {
			old := s.load()
			hook.At(hook.BeforeCAS)
			if s.cas(old, old.WithIdle(false)) {
				break
			}
		}
	}
	return ctx.Err()
}

// remove takes ch off the list.
func (iw *idleWaiters) remove(ch chan struct{}) {
	for i, c := range iw.chans {
		if c == ch {
			last := len(iw.chans) - 1
			iw.chans[i] = iw.chans[last]
			iw.chans[last] = nil
			iw.chans = iw.chans[:last]
			return
		}
	}
}

// wakeIdleLocked wakes every parked WaitIdle call. It requires that s.mu is
// held and that the word installed last, under it, has no permit held and
// the idle flag cleared.
func (s *Semaphore) wakeIdleLocked() {
	for i, ch := range s.idle.chans {
		close(ch)
		s.idle.chans[i] = nil
	}
	s.idle.chans = s.idle.chans[:0]
}
