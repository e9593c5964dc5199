package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/credit"
)

// The credit workload, briefly: every invariant must hold and be checked
// at least once.
func TestCreditStressFindsNoViolation(t *testing.T) {
	var out bytes.Buffer
	ok := runCredit(config{
		duration:      *testDuration,
		goroutines:    32,
		max:           16,
		seed:          1,
		credit:        true,
		rate:          2000,
		burst:         256,
		out:           &out,
		progressEvery: time.Second,
	})
	t.Log("\n" + out.String())
	require.True(t, ok, "the run reported violations")
	require.Contains(t, out.String(), "PASS: all")
}

// Credit spent beyond what the bucket could have held is reported as a
// violation of both over-credit checks, so the checks can fail.
func TestCreditChecksCatchOverCredit(t *testing.T) {
	var out bytes.Buffer
	r := &creditRunner{
		cfg:    config{burst: 16, rate: 1000, out: &out, progressEvery: time.Hour},
		checks: newCreditChecks(),
		start:  time.Now(),
		b:      credit.MustNew(1000, 16),
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.monitor(stop)
	}()
	time.Sleep(20 * time.Millisecond)
	r.spent.Add(1000) // far more than 16 + 1000·elapsed credits this early
	time.Sleep(20 * time.Millisecond)
	close(stop)
	<-done
	require.Positive(t, r.checks.cumulative.failed.Load())
	require.Positive(t, r.checks.window.failed.Load())
}

func TestCreditConfigRejectsNonsense(t *testing.T) {
	good := config{duration: time.Second, goroutines: 1, max: 1, credit: true, rate: 100, burst: 16}
	require.NoError(t, good.validate())
	tests := []struct {
		name   string
		change func(*config)
	}{
		{"zero rate", func(c *config) { c.rate = 0 }},
		{"rate beyond a credit a nanosecond", func(c *config) { c.rate = 1e9 }},
		{"burst below a request", func(c *config) { c.burst = 3 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.change(&c)
			require.Error(t, c.validate())
		})
	}
}
