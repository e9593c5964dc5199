package adaptivebench_test

import (
	"context"
	"time"

	"github.com/platinummonkey/go-concurrency-limits/core"
	"github.com/platinummonkey/go-concurrency-limits/limit"
	"github.com/platinummonkey/go-concurrency-limits/limiter"
	"github.com/platinummonkey/go-concurrency-limits/strategy"

	"github.com/atomicsem/atomicsem/adaptive/adaptivetest"
)

// gcl builds platinummonkey/go-concurrency-limits' DefaultLimiter over the
// limit algorithm newLimit makes: its SimpleStrategy admits while the
// in-flight count is below the limit, and the limiter updates the limit
// once per window of at least 100 samples, window long.
func gcl(name string, newLimit func(min, max, initial int) core.Limit, window time.Duration) peer {
	build := func(min, max, initial int) *limiter.DefaultLimiter {
		lim, err := limiter.NewDefaultLimiter(newLimit(min, max, initial),
			int64(window), int64(window), int64(100*time.Microsecond), 100,
			strategy.NewSimpleStrategy(initial), nil, nil)
		if err != nil {
			panic(err)
		}
		return lim
	}
	return peer{
		name: name,
		sim: func(_ time.Duration, min, max, initial int) adaptivetest.Limiter {
			return gclSim{build(min, max, initial)}
		},
		bench: func(min, max, initial int) admitter { return gclAdmitter{build(min, max, initial)} },
	}
}

type gclSim struct{ l *limiter.DefaultLimiter }

func (g gclSim) TryAcquire() (adaptivetest.Request, bool) {
	ls, ok := g.l.Acquire(context.Background())
	if !ok {
		return nil, false
	}
	return gclRequest{ls}, true
}

func (g gclSim) Limit() int { return g.l.EstimatedLimit() }

// gclRequest ends a go-concurrency-limits listener: a drop is OnDropped,
// which the limit algorithms take as a sign of overload, and a request
// whose client cancelled OnIgnore, which gives them no sample.
type gclRequest struct{ l core.Listener }

func (r gclRequest) Success() { r.l.OnSuccess() }
func (r gclRequest) Dropped() { r.l.OnDropped() }
func (r gclRequest) Ignored() { r.l.OnIgnore() }

type gclAdmitter struct{ l *limiter.DefaultLimiter }

func (a gclAdmitter) admitRecord() bool {
	ls, ok := a.l.Acquire(context.Background())
	if !ok {
		return false
	}
	ls.OnSuccess()
	return true
}

// gclGradient2 is go-concurrency-limits' Gradient2 with a queue of 4, a
// smoothing of 0.2 and a long window of 600 samples, its documented
// defaults.
func gclGradient2(min, max, initial int) core.Limit {
	l, err := limit.NewGradient2Limit("gradient2", initial, max, min, func(int) int { return 4 }, 0.2, 600, nil, nil)
	if err != nil {
		panic(err)
	}
	return l
}

// gclVegas is go-concurrency-limits' Vegas with its default thresholds.
func gclVegas(min, max, initial int) core.Limit {
	return limit.NewVegasLimitWithRegistry("vegas", initial, nil, max, -1, nil, nil, nil, nil, nil, -1, nil, nil)
}

func init() {
	peers = append(peers,
		gcl("gcl-gradient2", gclGradient2, time.Second),
		gcl("gcl-gradient2-100ms", gclGradient2, 100*time.Millisecond),
		gcl("gcl-vegas", gclVegas, time.Second),
		gcl("gcl-vegas-100ms", gclVegas, 100*time.Millisecond),
	)
}
