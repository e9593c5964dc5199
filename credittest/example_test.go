package credittest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/atomicsem/atomicsem/credit"
	"github.com/atomicsem/atomicsem/credittest"
)

// myBucket adapts a backend to the suite. Every method reports when the
// backend decided, on the backend's own clock, as a duration since an
// origin fixed for the bucket's life: here the process's clock, as
// credit.Bucket runs on it; a backend on a server reports the server's
// time of the decision instead (rediscredit's Result.Time), so that the
// laws are checked against the server's record, not the client's belief.
// An adapter fails the test on an error the suite did not ask for.
type myBucket struct {
	t      *testing.T
	b      *credit.Bucket // the backend
	origin time.Time
}

func (m *myBucket) at() time.Duration { return time.Since(m.origin) }

func (m *myBucket) TrySpend(n int64) (bool, time.Duration) { return m.b.TrySpend(n), m.at() }

func (m *myBucket) Spend(ctx context.Context, n int64) (time.Duration, error) {
	err := m.b.Spend(ctx, n)
	return m.at(), err
}

func (m *myBucket) TryReserve(n int64) (credittest.Reservation, bool, time.Duration) {
	tok, ok := m.b.TryAcquire(n)
	return &myReservation{m: m, release: tok.Release, forget: tok.Forget}, ok, m.at()
}

func (m *myBucket) Stats() (balance, reserved int64, at time.Duration) {
	st := m.b.Stats()
	return st.Balance, st.Reserved, m.at()
}

func (m *myBucket) SetRate(rate float64) time.Duration {
	if err := m.b.SetRate(rate); err != nil {
		m.t.Fatal(err)
	}
	return m.at()
}

type myReservation struct {
	m               *myBucket
	release, forget func()
}

func (r *myReservation) Release() time.Duration { r.release(); return r.m.at() }
func (r *myReservation) Forget() time.Duration  { r.forget(); return r.m.at() }

// newBucket is what the backend hands the suite: a full bucket of the rate
// and burst.
func newBucket(t *testing.T, rate float64, burst int64) credittest.Bucket {
	b, err := credit.New(rate, burst)
	if err != nil {
		t.Fatal(err)
	}
	return &myBucket{t: t, b: b, origin: time.Now()}
}

// A backend runs the laws from a test of its own:
//
//	func TestLaws(t *testing.T) {
//		credittest.Run(t, credittest.Config{New: newBucket})
//	}
//
// (with InBubble: true if it runs in a testing/synctest bubble, as
// credit.Bucket does), and the inputs every backend answers alike with
// credittest.CheckInputs. Here the adapter is driven by hand, and what it
// reports checked with CheckWindows, the check of the law on races.
func Example() {
	b := newBucket(nil, 1, 3) // a credit a second
	var spends []time.Duration
	for range 5 {
		if ok, at := b.TrySpend(1); ok {
			spends = append(spends, at)
		}
	}
	balance, reserved, _ := b.Stats()
	fmt.Println("spent", len(spends), "of a burst of 3; balance", balance, "reserved", reserved)
	fmt.Println("minted:", credittest.CheckWindows(1, 3, spends))
	// Output:
	// spent 3 of a burst of 3; balance 0 reserved 0
	// minted: <nil>
}
