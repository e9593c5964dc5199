package credittest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/atomicsem/atomicsem/credit"
	"github.com/atomicsem/atomicsem/credittest"
	"github.com/atomicsem/atomicsem/token"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bucket adapts a credit.Bucket to the suite; its clock is the bubble's
// fake clock, read as the time since the bucket was made.
type bucket struct {
	b      *credit.Bucket
	origin time.Time
}

func (b *bucket) since() time.Duration { return time.Since(b.origin) }

func (b *bucket) TrySpend(n int64) (bool, time.Duration) { return b.b.TrySpend(n), b.since() }

func (b *bucket) Spend(ctx context.Context, n int64) (time.Duration, error) {
	err := b.b.Spend(ctx, n)
	return b.since(), err
}

func (b *bucket) TryReserve(n int64) (credittest.Reservation, bool, time.Duration) {
	r := &reservation{b: b}
	var ok bool
	r.tok, ok = b.b.TryAcquire(n)
	return r, ok, b.since()
}

func (b *bucket) Stats() (int64, int64, time.Duration) {
	st := b.b.Stats()
	return st.Balance, st.Reserved, b.since()
}

func (b *bucket) SetRate(rate float64) time.Duration {
	if err := b.b.SetRate(rate); err != nil {
		panic(err)
	}
	return b.since()
}

type reservation struct {
	tok token.Token
	b   *bucket
}

func (r *reservation) Release() time.Duration { r.tok.Release(); return r.b.since() }
func (r *reservation) Forget() time.Duration  { r.tok.Forget(); return r.b.since() }

// The in-process bucket keeps the laws on synctest's exact fake clock.
func TestCreditKeepsTheLaws(t *testing.T) {
	credittest.Run(t, credittest.Config{
		InBubble: true,
		New: func(t *testing.T, rate float64, burst int64) credittest.Bucket {
			b, err := credit.New(rate, burst)
			require.NoError(t, err)
			return &bucket{b: b, origin: time.Now()}
		},
	})
}

// CheckWindows catches a window that holds more than the burst and the
// accrual, and passes one that holds exactly that.
func TestCheckWindowsCatchesMinting(t *testing.T) {
	ms := time.Millisecond
	exact := []time.Duration{0, 0, 0, 100 * ms, 200 * ms, 300 * ms} // burst 3, then one each 100ms at rate 10
	require.NoError(t, credittest.CheckWindows(10, 3, exact))
	require.Error(t, credittest.CheckWindows(10, 3, append(exact, 300*ms)), "a window with one credit too many passed")
	require.Error(t, credittest.CheckWindows(10, 3, []time.Duration{0, 0, 0, 99 * ms}), "a credit 1ms early passed")
}

func TestQuotesFindsAPackagesWordsOnly(t *testing.T) {
	require.True(t, credittest.Quotes("keyed: credit: invalid rate", "credit"))
	require.True(t, credittest.Quotes("credit: invalid rate", "credit"))
	require.True(t, credittest.Quotes("x (atomicsem: exceeds)", "atomicsem"))
	require.False(t, credittest.Quotes("rediscredit: invalid rate", "credit"))
	require.False(t, credittest.Quotes("rediscredit: a credit of 3", "credit"))
}
