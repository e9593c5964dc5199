package credit_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/credit"
)

// Every entry point that takes a pointer or an interface panics at the call
// when it is nil, in the package's voice and naming the argument, instead
// of a nil dereference deep inside.
func TestNilArgumentsPanicWithAMessage(t *testing.T) {
	var nilCtx context.Context
	var nb *credit.Bucket
	var nc *credit.Config
	zc := new(credit.Config) // the zero Config, as a caller that skipped NewConfig has it
	var s credit.State
	b := credit.MustNew(1, 1)
	c := credit.MustConfig(1, 1)
	tests := []struct {
		name string
		call func()
		want string // the argument the message names
	}{
		{"Spend, nil ctx", func() { _ = b.Spend(nilCtx, 1) }, "nil Context"},
		{"Acquire, nil ctx", func() { _, _ = b.Acquire(nilCtx, 1) }, "nil Context"},
		{"TrySpend, nil bucket", func() { nb.TrySpend(1) }, "nil *Bucket"},
		{"Spend, nil bucket", func() { _ = nb.Spend(context.Background(), 1) }, "nil *Bucket"},
		{"TryAcquire, nil bucket", func() { nb.TryAcquire(1) }, "nil *Bucket"},
		{"Acquire, nil bucket", func() { _, _ = nb.Acquire(context.Background(), 1) }, "nil *Bucket"},
		{"SetRate, nil bucket", func() { _ = nb.SetRate(1) }, "nil *Bucket"},
		{"Stats, nil bucket", func() { nb.Stats() }, "nil *Bucket"},
		{"New, nil option", func() { _, _ = credit.New(1, 1, nil) }, "nil Option"},
		{"MustNew, nil option", func() { credit.MustNew(1, 1, credit.WithInitial(0), nil) }, "nil Option"},
		{"Config.New, nil option", func() { _, _ = c.New(nil) }, "nil Option"},
		{"Config.New, nil config", func() { _, _ = nc.New() }, "nil *Config"},
		{"Config.MustNew, nil config", func() { nc.MustNew() }, "nil *Config"},
		{"Config.WithRate, nil config", func() { _, _ = nc.WithRate(1) }, "nil *Config"},
		{"Config.Now, nil config", func() { nc.Now() }, "nil *Config"},
		{"Config.Rate, nil config", func() { nc.Rate() }, "nil *Config"},
		{"Config.Burst, nil config", func() { nc.Burst() }, "nil *Config"},
		{"State.TrySpend, nil config", func() { s.TrySpend(nc, 0, 1) }, "nil *Config"},
		{"State.TrySpendSince, nil config", func() { s.TrySpendSince(nc, 0, 0, 1) }, "nil *Config"},
		{"State.TryReserve, nil config", func() { s.TryReserve(nc, 0, 1) }, "nil *Config"},
		{"State.TryReserveSince, nil config", func() { s.TryReserveSince(nc, 0, 0, 1) }, "nil *Config"},
		{"State.Release, nil config", func() { s.Release(nc, 0, 0) }, "nil *Config"},
		{"State.Forget, nil config", func() { s.Forget(nc, 0, 0) }, "nil *Config"},
		{"State.Balance, nil config", func() { s.Balance(nc, 0) }, "nil *Config"},
		{"State.Full, nil config", func() { s.Full(nc, 0) }, "nil *Config"},
		{"State.Wait, nil config", func() { s.Wait(nc, 0, 1) }, "nil *Config"},
		{"State.Rerate, nil from", func() { s.Rerate(nc, c, 0) }, "nil *Config"},
		{"State.Rerate, nil to", func() { s.Rerate(c, nc, 0) }, "nil *Config"},
		{"Config.New, zero config", func() { _, _ = zc.New() }, "zero Config"},
		{"Config.Burst, zero config", func() { zc.Burst() }, "zero Config"},
		{"Config.Now, zero config", func() { zc.Now() }, "zero Config"},
		{"State.TrySpend, zero config", func() { s.TrySpend(zc, 0, 1) }, "zero Config"},
		{"State.Balance, zero config", func() { s.Balance(zc, 0) }, "zero Config"},
		{"State.TrySpendSince, since after now", func() { s.TrySpendSince(c, 2e18+1, 2e18, 1) }, "since"},
		{"State.TryReserveSince, since after now", func() { s.TryReserveSince(c, 2e18+1, 2e18, 1) }, "since"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := panicMessage(t, tt.call)
			require.True(t, strings.HasPrefix(msg, "credit: "), "panic %q lacks the package prefix", msg)
			require.Contains(t, msg, tt.want)
		})
	}
	require.Equal(t, credit.Stats{Balance: 1, Burst: 1, Rate: 1}, b.Stats(), "a panicking call changed the bucket")
	require.Equal(t, credit.State{}, s, "a panicking call changed the state")
}

func panicMessage(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		require.NotNil(t, r, "no panic")
		msg, _ = r.(string)
		require.NotEmpty(t, msg, "panic value %v is not a message", r)
	}()
	f()
	return ""
}

// NewConfig and WithRate refuse what New refuses, with the same errors.
func TestConfigRejectsBadArguments(t *testing.T) {
	tests := []struct {
		name  string
		rate  float64
		burst int64
		want  error
	}{
		{"negative rate", -1, 10, credit.ErrInvalidRate},
		{"NaN rate", math.NaN(), 10, credit.ErrInvalidRate},
		{"negative infinite rate", math.Inf(-1), 10, credit.ErrInvalidRate},
		{"zero burst", 1, 0, credit.ErrInvalidBurst},
		{"negative burst", 1, -3, credit.ErrInvalidBurst},
	}
	c := credit.MustConfig(10, 10)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := credit.NewConfig(tt.rate, tt.burst)
			require.ErrorIs(t, err, tt.want)
			require.Nil(t, got)
			require.Panics(t, func() { credit.MustConfig(tt.rate, tt.burst) })
			if tt.want == credit.ErrInvalidRate {
				got, err = c.WithRate(tt.rate)
				require.ErrorIs(t, err, tt.want)
				require.Nil(t, got)
			}
		})
	}
	require.Equal(t, 10.0, c.Rate())
}

// A State refuses requests outside [0, burst − reserved] and changes
// nothing.
func TestStateRefusesRequestsOutsideTheBurst(t *testing.T) {
	c := credit.MustConfig(10, 5)
	now := c.Now()
	var s credit.State
	require.True(t, s.TryReserve(c, now, 2))
	before := s
	for _, n := range []int64{-1, 4, 6, math.MaxInt64} {
		require.False(t, s.TrySpend(c, now, n), "TrySpend(%d)", n)
		require.False(t, s.TryReserve(c, now, n), "TryReserve(%d)", n)
		_, ok := s.Wait(c, now, n)
		require.False(t, ok, "Wait(%d)", n)
	}
	require.Equal(t, before, s)
}
