package atomicsem_test

import (
	"strings"
	"testing"
	"time"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/semtest"
)

// A *Semaphore is a semtest.Semaphore as it is, TryForget included.
var (
	_ semtest.Semaphore = (*atomicsem.Semaphore)(nil)
	_ semtest.Forgetter = (*atomicsem.Semaphore)(nil)
)

// polled is a semaphore that the suite quiesces by polling, as it does
// one that cannot run in a bubble: its parked calls are its queue.
type polled struct{ *atomicsem.Semaphore }

func (p polled) Parked() int { return p.Semaphore.Stats().Waiters }

// TestConformance runs the conformance suite against both modes, and both
// modes with a permit cache shrunk to blocks of one permit (in bubbles
// only: polling checks the suite, which the plain modes do). Each mode
// runs twice: quiesced by synctest.Wait in bubbles, where the checks of
// exact fake time run too, and quiesced by polling, as the suite quiesces a
// semaphore that talks to a server, which checks the suite's own polling
// against the reference implementation. Barging runs once more with a
// short and with a long starvation bound, in bubbles only: the short one
// checks that a configured bound is the one kept, and under the long one a
// parked waiter never starves in real time, so the race between a grant
// and a cancellation meets a woken waiter that competes for the permit
// instead of one handed it. The long bound is not declared to the suite:
// streaming small requests for three hours of fake time would take
// minutes.
func TestConformance(t *testing.T) {
	barging := func(bound time.Duration) []atomicsem.Option {
		return []atomicsem.Option{atomicsem.WithBarging(), atomicsem.WithStarvationBound(bound)}
	}
	modes := []struct {
		name  string
		opts  []atomicsem.Option
		suite []semtest.Option
		poll  bool
	}{
		{"mode=fifo", nil, nil, true},
		{"mode=barging", []atomicsem.Option{atomicsem.WithBarging()},
			[]semtest.Option{semtest.Barging(), semtest.StarvationBound(atomicsem.DefaultStarvationBound)}, true},
		{"mode=barging/bound=5ms", barging(5 * time.Millisecond),
			[]semtest.Option{semtest.Barging(), semtest.StarvationBound(5 * time.Millisecond)}, false},
		{"mode=barging/bound=1h", barging(time.Hour),
			[]semtest.Option{semtest.Barging()}, false},
		{"mode=fifo/cache=tiny", []atomicsem.Option{atomicsem.WithPermitCache()}, nil, false},
		{"mode=barging/cache=tiny", []atomicsem.Option{atomicsem.WithBarging(), atomicsem.WithPermitCache()},
			[]semtest.Option{semtest.Barging(), semtest.StarvationBound(atomicsem.DefaultStarvationBound)}, false},
	}
	for _, m := range modes {
		newSem := func(poll bool) semtest.NewFunc {
			return func(_ *testing.T, initial, max int64) (semtest.Semaphore, error) {
				s, err := atomicsem.New(initial, max, m.opts...)
				if err == nil && strings.Contains(m.name, "cache=tiny") {
					// Blocks of one permit and no reserve: the suite's small
					// semaphores go through the cache and turn it on and off.
					atomicsem.TinyCache(s)
				}
				switch {
				case err != nil:
					return nil, err
				case poll:
					return polled{s}, nil
				default:
					return s, nil
				}
			}
		}
		t.Run(m.name+"/settle=bubble", func(t *testing.T) {
			semtest.Run(t, newSem(false), append(m.suite, semtest.InBubble(), semtest.MemoryModel())...)
		})
		if !m.poll {
			continue
		}
		t.Run(m.name+"/settle=poll", func(t *testing.T) {
			// The concurrent checks are the same as in bubbles; run them
			// small.
			semtest.Run(t, newSem(true), append(m.suite, semtest.MemoryModel(), semtest.Load(4, 100), semtest.Rounds(50))...)
		})
	}
}
