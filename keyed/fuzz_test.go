package keyed_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/atomicsem/atomicsem/keyed"
	"github.com/atomicsem/atomicsem/token"
)

// FuzzKeysConcurrent runs three goroutines, each with its own part of the
// input as a list of operations on four keys, against a Semaphores table
// and a Limiter, both with a cap of three keys, and checks what no
// interleaving may break: no key holds more than its limit at once; no key
// spends more than its burst in all, at a rate of zero (a key dropped while
// spent would get a fresh burst); the tables never hold more than their
// cap; and once every token is back, Sweep leaves the Semaphores empty.
func FuzzKeysConcurrent(f *testing.F) {
	f.Add([]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff})
	f.Add([]byte{0x01, 0x41, 0x81, 0xc1, 0x02, 0x42, 0x82, 0xc2, 0x13, 0x53, 0x93, 0xd3, 0x04, 0x44})
	f.Add([]byte{0xf0, 0xf1, 0xf2, 0xf3, 0x30, 0x31, 0x32, 0x33, 0x70, 0x71, 0x72, 0x73})
	keys := []string{"a", "b", "c", "d"}
	const limit, burst, maxKeys = 2, 3, 3
	f.Fuzz(func(t *testing.T, ops []byte) {
		s := keyed.MustNewSemaphores(limit, keyed.WithMaxKeys(maxKeys))
		l := keyed.MustNewLimiter(0, burst, keyed.WithMaxKeys(maxKeys))
		var inFlight, spent [4]atomic.Int64
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var held []*token.Token
				var heldKey []int
				for i := g; i < len(ops); i += 3 {
					op, k := ops[i]>>4, int(ops[i]&3)
					n := int64(ops[i]>>2&3) % 3
					switch {
					case op < 6:
						tok, ok := s.TryAcquire(keys[k], n)
						if !ok {
							continue
						}
						if inFlight[k].Add(n) > limit {
							t.Errorf("key %s: more than %d permits held", keys[k], limit)
						}
						held, heldKey = append(held, &tok), append(heldKey, k)
					case op < 9 && len(held) > 0:
						j := len(held) - 1
						inFlight[heldKey[j]].Add(-held[j].Permits())
						held[j].Release()
						held, heldKey = held[:j], heldKey[:j]
					case op < 13:
						if l.TrySpend(keys[k], n) && spent[k].Add(n) > burst {
							t.Errorf("key %s: spent more than the burst of %d at rate 0", keys[k], burst)
						}
					case op == 13:
						s.Sweep()
					default:
						l.Sweep()
					}
					if s.Len() > maxKeys || l.Len() > maxKeys {
						t.Errorf("over the cap: %d semaphore keys, %d limiter keys", s.Len(), l.Len())
					}
				}
				for j, tok := range held {
					inFlight[heldKey[j]].Add(-tok.Permits())
					tok.Release()
				}
			}()
		}
		wg.Wait()
		if err := keyed.CheckDue(l); err != nil {
			t.Error(err)
		}
		s.Sweep()
		if s.Len() != 0 {
			t.Errorf("%d semaphore keys left with nothing held", s.Len())
		}
	})
}
