package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
)

var testDuration = flag.Duration("stress.duration", 2*time.Second,
	"how long each mode of TestStressFindsNoViolation runs")

// The stress workload, briefly, in both modes: every invariant must hold and
// be checked at least once.
func TestStressFindsNoViolation(t *testing.T) {
	tests := []struct {
		name    string
		barging bool
	}{
		{"mode=fifo", false},
		{"mode=barging", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			checks := run(config{
				duration:      *testDuration,
				goroutines:    64,
				max:           16,
				seed:          1,
				barging:       tt.barging,
				out:           &out,
				progressEvery: time.Second,
			})
			t.Log("\n" + out.String())
			require.True(t, checks.passed(), "the run reported violations")
			require.Contains(t, out.String(), "PASS: all")
		})
	}
}

// A violation anywhere, or an invariant never checked, makes the report say
// FAIL and run's result not pass, which is what makes the command exit 1.
func TestReportFailsOnAViolationOrAnUncheckedInvariant(t *testing.T) {
	tests := []struct {
		name  string
		setup func(c *checks)
		want  string
	}{
		{
			name: "violation",
			setup: func(c *checks) {
				c.holdersMax.pass()
				c.holdersMax.failf("17 permits held, max 16")
			},
			want: "first violation: 17 permits held, max 16",
		},
		{
			name:  "never checked",
			setup: func(*checks) {},
			want:  "first violation: never checked",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			cfg := config{duration: time.Second, goroutines: 1, max: 16, out: &out}
			r := &runner{cfg: cfg, checks: newChecks(cfg), start: time.Now()}
			r.prober.raced = 1
			for _, c := range r.checks.all() {
				c.pass() // every check ran once and held...
			}
			r.checks.holdersMax = check{what: r.checks.holdersMax.what} // ...but this one
			tt.setup(r.checks)
			r.report()
			require.False(t, r.checks.passed())
			require.Contains(t, out.String(), "FAIL  "+r.checks.holdersMax.what)
			require.Contains(t, out.String(), tt.want)
			require.True(t, strings.HasPrefix(lastLine(out.String()), "FAIL: 1 of"), lastLine(out.String()))
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestConfigRejectsNonsense(t *testing.T) {
	good := config{duration: time.Second, goroutines: 1, max: 1}
	require.NoError(t, good.validate())
	tests := []struct {
		name   string
		change func(*config)
	}{
		{"zero duration", func(c *config) { c.duration = 0 }},
		{"no goroutines", func(c *config) { c.goroutines = 0 }},
		{"zero max", func(c *config) { c.max = 0 }},
		{"max above MaxPermits", func(c *config) { c.max = atomicsem.MaxPermits + 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.change(&c)
			require.Error(t, c.validate())
		})
	}
}
