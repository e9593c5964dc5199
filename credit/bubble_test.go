package credit_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/credit"
)

// bubbleChildEnv names the shape a child process runs (see
// TestBucketCrossesBubbleBoundaries).
const bubbleChildEnv = "CREDIT_BUBBLE_CHILD"

// bubbleShapes are ways one bucket is used in and out of testing/synctest
// bubbles. The runtime stops the whole process, with no panic to recover,
// when a goroutine uses a timer or channel of another bubble, so each
// shape runs in a child process, and the test fails if the child dies.
var bubbleShapes = map[string]func(t *testing.T){
	// A package-level bucket, as MustNew's doc suggests, used in a bubble
	// while accrual is due, then outside it.
	"made outside, used inside, then outside": func(t *testing.T) {
		b := credit.MustNew(10, 100)
		synctest.Test(t, func(t *testing.T) {
			b.TrySpend(50)
			time.Sleep(6 * time.Second)
		})
		b.TrySpend(50)
		b.Stats()
	},
	// The reverse: made and drained in a bubble, then used outside it and
	// in a second bubble.
	"made inside, used outside and in another bubble": func(t *testing.T) {
		var b *credit.Bucket
		synctest.Test(t, func(t *testing.T) {
			b = credit.MustNew(10, 100)
			require.True(t, b.TrySpend(100))
			time.Sleep(time.Second)
		})
		b.TrySpend(5)
		synctest.Test(t, func(t *testing.T) {
			b.TrySpend(5)
			time.Sleep(time.Second)
			b.Stats()
		})
		b.TrySpend(5)
	},
	// A waiter in a bubble on a bucket made outside: it parks on its own
	// timer, in its bubble, and is served; then a waiter outside.
	"waiter inside a bubble, then outside": func(t *testing.T) {
		b := credit.MustNew(1000, 1)
		require.True(t, b.TrySpend(1))
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 100*365*24*time.Hour)
			defer cancel()
			require.NoError(t, b.Spend(ctx, 1))
			tok, err := b.Acquire(ctx, 1)
			require.NoError(t, err)
			tok.Release()
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, b.Spend(ctx, 1))
		require.NoError(t, b.Spend(ctx, 1))
	},
}

// A bucket crosses bubble boundaries without stopping the process: no
// timer or channel of one bubble is touched from outside it, because a
// bucket owns none and a waiter parks only on its own.
func TestBucketCrossesBubbleBoundaries(t *testing.T) {
	if shape := os.Getenv(bubbleChildEnv); shape != "" {
		bubbleShapes[shape](t)
		return
	}
	for name := range bubbleShapes {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBucketCrossesBubbleBoundaries$", "-test.count=1")
			cmd.Env = append(os.Environ(), bubbleChildEnv+"="+name)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "the child process failed:\n%s", out)
		})
	}
}
