package keyed_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/keyed"
)

// request sends one request for key through h and returns the response's
// status, Retry-After and the t of its RateLimit field ("" if absent).
func request(h http.Handler, key string) (code int, retryAfter, t string) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Key", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	rl := w.Header().Get("RateLimit")
	if i := strings.Index(rl, ";t="); i >= 0 {
		t = rl[i+3:]
	}
	return w.Code, w.Header().Get("Retry-After"), t
}

func byKey(r *http.Request) string { return r.Header.Get("Key") }

// A request refused while a Spend of the same key waits for credit that
// the balance does not yet cover is told to wait until accrual covers the
// waiter and then it, not "Retry-After: 0".
func TestRefusalBehindAWaiterNamesAPositiveWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := keyed.MustNewLimiter(1, 3)
		h := keyed.Middleware(l, keyed.WithKeyFunc(byKey))(ok200)
		require.True(t, l.TrySpend("k", 1)) // balance 2
		done := make(chan error, 1)
		go func() { done <- l.Spend(context.Background(), "k", 3) }()
		synctest.Wait()

		d, err := l.Take("k", 1)
		require.NoError(t, err)
		require.False(t, d.Spent, "the balance is the waiter's")
		require.Equal(t, int64(2), d.Balance)
		// The waiter's 3 accrue in 1 s, then the request's 1 in another.
		require.Equal(t, 2*time.Second, d.RetryIn)

		code, retryAfter, tParam := request(h, "k")
		require.Equal(t, http.StatusTooManyRequests, code)
		require.Equal(t, "2", retryAfter)
		require.Equal(t, retryAfter, tParam, "t names the moment Retry-After does")
		time.Sleep(time.Second)
		synctest.Wait()
		require.NoError(t, <-done)
	})
}

// A request refused because reservations hold the key's whole burst is
// told when accrual would cover it were the reserved credit spent, not
// t=0 and no Retry-After.
func TestRefusalWhileTheBurstIsReservedNamesAPositiveWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := keyed.MustNewLimiter(1, 2)
		h := keyed.Middleware(l, keyed.WithKeyFunc(byKey))(ok200)
		tok, ok := l.TryAcquire("k", 2)
		require.True(t, ok)
		d, err := l.Take("k", 1)
		require.NoError(t, err)
		require.Equal(t, time.Second, d.RetryIn)
		code, retryAfter, tParam := request(h, "k")
		require.Equal(t, http.StatusTooManyRequests, code)
		require.Equal(t, "1", retryAfter)
		require.Equal(t, "1", tParam)
		tok.Release()
		code, _, _ = request(h, "k")
		require.Equal(t, http.StatusOK, code)
	})
}

// Every refusal, among requests at random moments on a few keys, some
// behind waiting Spends and reservations, names a wait of at least a
// second, and t names the same moment as Retry-After; every request
// passed on names in t when its key is full.
func TestEveryRefusalNamesTheSameMomentTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(59, 429))
		l := keyed.MustNewLimiter(0.7, 3)
		h := keyed.Middleware(l, keyed.WithKeyFunc(byKey))(ok200)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		refusals := 0
		for range 400 {
			key := strconv.Itoa(rng.IntN(3))
			switch rng.IntN(6) {
			case 0:
				go func() { _ = l.Spend(ctx, key, 1+rng.Int64N(3)) }()
			case 1:
				if tok, ok := l.TryAcquire(key, 1); ok {
					go func() { time.Sleep(time.Second); tok.Release() }()
				}
			}
			synctest.Wait()
			code, retryAfter, tParam := request(h, key)
			if code == http.StatusTooManyRequests {
				refusals++
				n, err := strconv.Atoi(retryAfter)
				require.NoError(t, err, "Retry-After %q", retryAfter)
				require.Positive(t, n)
				require.Equal(t, retryAfter, tParam)
			} else {
				require.Equal(t, http.StatusOK, code)
				require.NotEmpty(t, tParam)
			}
			time.Sleep(time.Duration(rng.Int64N(int64(700 * time.Millisecond))))
		}
		require.Greater(t, refusals, 50, "the check is idle")
		cancel()
		time.Sleep(2 * time.Second)
		synctest.Wait()
	})
}
