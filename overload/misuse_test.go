package overload_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/overload"
)

func TestNewRefusesWhatItCannotBuild(t *testing.T) {
	tests := []struct {
		name          string
		limit, max    int64
		classes       []overload.Class
		opts          []overload.Option
		want          error
		wantInMessage string
	}{
		{"no classes", 1, 1, nil, nil, overload.ErrInvalidClasses, "0 classes"},
		{"five classes", 1, 1, classes(0, 0, 0, 0, 0), nil, overload.ErrInvalidClasses, "5 classes"},
		{"no name", 1, 1, []overload.Class{{}}, nil, overload.ErrInvalidClasses, "no name"},
		{"two names alike", 1, 1, []overload.Class{{Name: "a"}, {Name: "A"}}, nil, overload.ErrInvalidClasses, "two classes"},
		{"negative share", 1, 1, []overload.Class{{Name: "a", Share: -0.1}}, nil, overload.ErrInvalidClasses, "Share"},
		{"NaN share", 1, 1, []overload.Class{{Name: "a", Share: math.NaN()}}, nil, overload.ErrInvalidClasses, "Share"},
		{"shares above 1", 1, 1, classes(0.6, 0.5), nil, overload.ErrInvalidClasses, "add up"},
		{"MaxShare below Share", 1, 1, []overload.Class{{Name: "a", Share: 0.5, MaxShare: 0.4}}, nil, overload.ErrInvalidClasses, "MaxShare"},
		{"MaxShare above 1", 1, 1, []overload.Class{{Name: "a", MaxShare: 1.5}}, nil, overload.ErrInvalidClasses, "MaxShare"},
		{"negative limit", -1, 1, classes(0), nil, overload.ErrInvalidPermits, ""},
		{"limit above max", 2, 1, classes(0), nil, overload.ErrInvalidPermits, ""},
		{"max above MaxPermits(4)", 1, 4096, classes(0, 0, 0, 0), nil, overload.ErrInvalidPermits, "4095"},
		{"negative queue", 1, 1, classes(0), []overload.Option{overload.WithMaxQueue(-1)}, overload.ErrInvalidOption, "WithMaxQueue"},
		{"negative wait", 1, 1, classes(0), []overload.Option{overload.WithMaxWait(-1)}, overload.ErrInvalidOption, "WithMaxWait"},
		{"negative CoDel", 1, 1, classes(0), []overload.Option{overload.WithCoDel(-1, 0)}, overload.ErrInvalidOption, "WithCoDel"},
		{"negative bound", 1, 1, classes(0), []overload.Option{overload.WithStarvationBound(-1)}, overload.ErrInvalidOption, "WithStarvationBound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := overload.New(tt.limit, tt.max, tt.classes, tt.opts...)
			require.Nil(t, g)
			require.ErrorIs(t, err, tt.want)
			require.Contains(t, err.Error(), "overload: ")
			require.Contains(t, err.Error(), tt.wantInMessage)
		})
	}
	// The largest of each layout is accepted, and shares that add up to 1
	// are not refused for rounding.
	for k := 1; k <= overload.MaxClasses; k++ {
		cl := make([]overload.Class, k)
		for c := range cl {
			cl[c] = overload.Class{Name: string(rune('a' + c)), Share: 1 / float64(k)}
		}
		_, err := overload.New(overload.MaxPermits(k), overload.MaxPermits(k), cl)
		require.NoError(t, err, "k %d", k)
	}
}

// TestSiblingsAnswerAlike holds the gate to the answers the semaphores give
// for the same input: the same sentinels for a negative request, a request
// above the maximum, a limit out of range and a closed gate.
func TestSiblingsAnswerAlike(t *testing.T) {
	s := atomicsem.MustNew(2, 4)
	g := overload.MustNew(2, 4, classes(0))
	_, errS := s.Acquire(bg, -1)
	_, errG := g.Acquire(bg, 0, -1)
	require.ErrorIs(t, errS, atomicsem.ErrInvalidPermits)
	require.ErrorIs(t, errG, atomicsem.ErrInvalidPermits)
	_, errS = s.Acquire(bg, 5)
	_, errG = g.Acquire(bg, 0, 5)
	require.ErrorIs(t, errS, atomicsem.ErrExceedsMax)
	require.ErrorIs(t, errG, atomicsem.ErrExceedsMax)
	require.ErrorIs(t, s.SetLimit(-1), atomicsem.ErrInvalidPermits)
	require.ErrorIs(t, g.SetLimit(-1), atomicsem.ErrInvalidPermits)
	require.ErrorIs(t, s.SetLimit(5), atomicsem.ErrExceedsMax)
	require.ErrorIs(t, g.SetLimit(5), atomicsem.ErrExceedsMax)
	_, okS := s.TryAcquire(0)
	_, okG := g.TryAcquire(0, 0)
	require.True(t, okS)
	require.True(t, okG)
	s.Close()
	g.Close()
	_, errS = s.Acquire(bg, 1)
	_, errG = g.Acquire(bg, 0, 1)
	require.ErrorIs(t, errS, atomicsem.ErrClosed)
	require.ErrorIs(t, errG, atomicsem.ErrClosed)
	_, errG = g.Acquire(bg, 0, 0)
	require.ErrorIs(t, errG, atomicsem.ErrClosed)
	// A request its class could never hold at the maximum limit is
	// refused at once, as one above the maximum is.
	h := overload.MustNew(4, 4, []overload.Class{{Name: "a", MaxShare: 0.5}})
	_, errG = h.Acquire(bg, 0, 3)
	require.ErrorIs(t, errG, atomicsem.ErrExceedsMax)
	require.Contains(t, errG.Error(), "overload: ")
	// A context done before the call fails at once, unwrapped, even with
	// permits free.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, errG = h.Acquire(ctx, 0, 1)
	require.Equal(t, context.Canceled, errG)
}

func TestMisuseIsAPrefixedPanic(t *testing.T) {
	g := overload.MustNew(1, 1, classes(0, 0))
	var nilGate *overload.Gate
	var nilThrottle *overload.Throttle
	var nilCtx context.Context
	tests := []struct {
		name string
		call func()
	}{
		{"Acquire on nil", func() { _, _ = nilGate.Acquire(bg, 0, 1) }},
		{"TryAcquire on nil", func() { _, _ = nilGate.TryAcquire(0, 1) }},
		{"SetLimit on nil", func() { _ = nilGate.SetLimit(1) }},
		{"Stats on nil", func() { _ = nilGate.Stats() }},
		{"Close on nil", func() { nilGate.Close() }},
		{"Held on nil", func() { _ = nilGate.Held() }},
		{"zero Gate", func() { _, _ = (&overload.Gate{}).TryAcquire(0, 1) }},
		{"nil context", func() { _, _ = g.Acquire(nilCtx, 0, 1) }},
		{"class out of range", func() { _, _ = g.Acquire(bg, 2, 1) }},
		{"negative class", func() { _, _ = g.TryAcquire(-1, 1) }},
		{"nil option", func() { _, _ = overload.New(1, 1, classes(0), nil) }},
		{"MustNew of bad classes", func() { overload.MustNew(1, 1, nil) }},
		{"Middleware of nil", func() { overload.Middleware(nil) }},
		{"nil HTTPOption", func() { overload.Middleware(g, nil) }},
		{"wrapping nil", func() { overload.Middleware(g)(nil) }},
		{"WithClassFunc(nil)", func() { overload.WithClassFunc(nil) }},
		{"WithRejection(nil)", func() { overload.WithRejection(nil) }},
		{"unknown default class", func() { overload.Middleware(g, overload.WithDefaultClass("nope")) }},
		{"Allow on nil", func() { nilThrottle.Allow() }},
		{"zero Throttle", func() { (&overload.Throttle{}).Accepted() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r, "no panic")
				msg := ""
				switch v := r.(type) {
				case string:
					msg = v
				case error:
					msg = v.Error()
				}
				require.True(t, strings.HasPrefix(msg, "overload: "), "panic %q", msg)
			}()
			tt.call()
		})
	}
}

func TestAReleaseOfMoreThanHeldPanicsAndChangesNothing(t *testing.T) {
	g := overload.MustNew(2, 2, classes(0, 0))
	tok := take(t, g, 0, 1)
	other := take(t, g, 1, 1)
	part, ok := tok.Split(1) // tok holds nothing now, part holds 1
	require.True(t, ok)
	part.Release()
	// A second release of class 0's permit through a copy: the gate
	// refuses it before anything changes.
	st := g.Stats()
	require.PanicsWithValue(t, "overload: released more permits of a class than its tokens hold (was a token copied?)",
		func() { g.ReleaseForTest(0, 1) })
	require.Equal(t, st, g.Stats())
	other.Release()
	tok.Release()
}

func TestForgetRetiresPermitsAndSplitKeepsTheClass(t *testing.T) {
	g := overload.MustNew(4, 4, classes(0, 0))
	tok := take(t, g, 1, 3)
	part, ok := tok.Split(2)
	require.True(t, ok)
	require.Equal(t, []int64{0, 3}, heldBy(g))
	part.Forget()
	st := g.Stats()
	require.Equal(t, int64(2), st.Limit)
	require.Equal(t, []int64{0, 1}, heldBy(g))
	tok.Release()
	require.Equal(t, int64(0), g.Held())
}
