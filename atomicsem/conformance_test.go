package atomicsem_test

import (
	"testing"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/semtest"
)

// conformant is an atomicsem.Semaphore as semtest sees it: the same
// methods, with semtest's Stats.
type conformant struct{ *atomicsem.Semaphore }

func (c conformant) Stats() semtest.Stats { return semtest.Stats(c.Semaphore.Stats()) }

// polled is a conformant semaphore that the suite settles by polling, as it
// settles one that cannot run in a bubble: its parked calls are its queue.
type polled struct{ conformant }

func (p polled) Parked() int { return p.Semaphore.Stats().Waiters }

// TestConformance runs the conformance suite against both modes. Each mode
// runs twice: settled by synctest.Wait in bubbles, where the checks of
// exact fake time run too, and settled by polling, as the suite settles a
// semaphore that talks to a server, which checks the suite's own polling
// against the reference implementation.
func TestConformance(t *testing.T) {
	modes := []struct {
		name  string
		opts  []atomicsem.Option
		suite []semtest.Option
	}{
		{"mode=fifo", nil, nil},
		{"mode=barging", []atomicsem.Option{atomicsem.WithBarging()}, []semtest.Option{semtest.Barging()}},
	}
	for _, m := range modes {
		newSem := func(poll bool) semtest.NewFunc {
			return func(_ *testing.T, initial, max int64) (semtest.Semaphore, error) {
				s, err := atomicsem.New(initial, max, m.opts...)
				switch {
				case err != nil:
					return nil, err
				case poll:
					return polled{conformant{s}}, nil
				default:
					return conformant{s}, nil
				}
			}
		}
		t.Run(m.name+"/settle=bubble", func(t *testing.T) {
			semtest.Run(t, newSem(false), append(m.suite, semtest.InBubble(), semtest.MemoryModel())...)
		})
		t.Run(m.name+"/settle=poll", func(t *testing.T) {
			// The concurrent checks are the same as in bubbles; run them
			// small.
			semtest.Run(t, newSem(true), append(m.suite, semtest.MemoryModel(), semtest.Load(4, 100), semtest.Rounds(50))...)
		})
	}
}
