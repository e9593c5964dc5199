package leasesim_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// bucket is one key's state as the script keeps it (see rediscredit's
// script.go): the model holds the same eight numbers, as float64s, so that
// its arithmetic is the script's.
type bucket struct {
	avail, held, origin, minted, was float64
	lcur, lprev, epoch               float64
}

// backend is a model of Redis running rediscredit's script, for the
// operations a Lease makes ("lease") and Stats ("stats"). It implements
// redis.Scripter, so that a Limiter takes it as a client. Each call takes
// rtt of the caller's clock (half before the script runs, half after) and
// runs the script atomically, at the caller's time.Now: inside a synctest
// bubble, the fake clock.
type backend struct {
	rtt   time.Duration
	now   func() float64 // µs since the Unix epoch; time.Now's unless set
	calls atomic.Int64

	mu      sync.Mutex
	buckets map[string]*bucket
}

func newBackend(rtt time.Duration) *backend {
	return &backend{rtt: rtt, buckets: map[string]*bucket{}}
}

func (b *backend) Eval(ctx context.Context, _ string, keys []string, args ...any) *redis.Cmd {
	return b.EvalSha(ctx, "", keys, args...)
}

func (b *backend) EvalSha(ctx context.Context, _ string, keys []string, args ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	b.calls.Add(1)
	if err := sleep(ctx, b.rtt/2); err != nil {
		cmd.SetErr(err)
		return cmd
	}
	out, err := b.run(keys[0], args)
	if err != nil {
		cmd.SetErr(err)
		return cmd
	}
	if err := sleep(ctx, b.rtt-b.rtt/2); err != nil {
		cmd.SetErr(err)
		return cmd
	}
	cmd.SetVal(out)
	return cmd
}

func (b *backend) EvalRO(ctx context.Context, s string, keys []string, args ...any) *redis.Cmd {
	return b.Eval(ctx, s, keys, args...)
}

func (b *backend) EvalShaRO(ctx context.Context, s string, keys []string, args ...any) *redis.Cmd {
	return b.EvalSha(ctx, s, keys, args...)
}

func (b *backend) ScriptExists(ctx context.Context, _ ...string) *redis.BoolSliceCmd {
	return redis.NewBoolSliceCmd(ctx)
}

func (b *backend) ScriptLoad(ctx context.Context, _ string) *redis.StringCmd {
	return redis.NewStringCmd(ctx)
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func num(a any) float64 {
	switch v := a.(type) {
	case int64:
		return float64(v)
	case int:
		return float64(v)
	case float64:
		return v
	}
	panic(fmt.Sprintf("leasesim: argument %T", a))
}

func pack(xs ...float64) string {
	b := make([]byte, 0, 8*len(xs))
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return string(b)
}

// run runs the script's operation on key, as the script does.
func (b *backend) run(key string, args []any) (string, error) {
	params := args[0].(string)
	rate := math.Float64frombits(binary.LittleEndian.Uint64([]byte(params[0:])))
	burst := math.Float64frombits(binary.LittleEndian.Uint64([]byte(params[8:])))
	hold := math.Float64frombits(binary.LittleEndian.Uint64([]byte(params[16:])))
	op := fmt.Sprint(args[1])
	n := num(args[2])
	m, limit := 0.0, -1.0
	if len(args) > 3 {
		m, limit = num(args[3]), num(args[4])
	}
	var mine, from float64
	if op == "lease" {
		mine, from = num(args[5]), num(args[6])
	} else if op != "stats" {
		return "", errors.New("leasesim: the model runs lease and stats only")
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	var now float64
	if b.now != nil {
		now = b.now()
	} else {
		now = float64(time.Now().UnixMicro())
	}
	floor, ceil := math.Floor, math.Ceil
	span := hold * 1000
	gen := floor(now / span)
	s := b.buckets[key]
	if s == nil {
		s = &bucket{avail: burst, origin: -1, was: rate, epoch: gen}
		b.buckets[key] = s
	}
	if s.lcur+s.lprev == 0 {
		s.epoch = gen // the script writes no generation with nothing leased
	}
	if s.origin >= 0 && now > s.origin {
		due := floor(s.was * (now - s.origin) / 1e6)
		if due > s.minted {
			s.avail += due - s.minted
			s.minted = due
		}
	}
	if s.avail+s.held+s.lcur+s.lprev >= burst {
		s.avail = burst - s.held - s.lcur - s.lprev
		s.origin, s.minted = -1, 0
	} else if s.minted >= 2147483648 {
		s.origin, s.minted = now, 0
	}
	if gen != s.epoch {
		dropped := -1.0
		if gen == s.epoch+1 {
			if s.lprev > 0 {
				dropped = gen * span
			}
			s.lprev, s.lcur = s.lcur, 0
		} else {
			switch {
			case gen < s.epoch:
				dropped = now
			case s.lcur > 0:
				dropped = (s.epoch + 2) * span
			case s.lprev > 0:
				dropped = (s.epoch + 1) * span
			}
			s.lprev, s.lcur = 0, 0
		}
		s.epoch = gen
		if dropped >= 0 && s.origin < 0 && s.avail+s.held+s.lcur+s.lprev < burst {
			s.origin, s.minted = math.Min(dropped, now), 0
			if s.was > 0 && now > s.origin {
				s.minted = floor(s.was * (now - s.origin) / 1e6)
				s.avail += s.minted
				if s.avail+s.held+s.lcur+s.lprev >= burst {
					s.avail = burst - s.held - s.lcur - s.lprev
					s.origin, s.minted = -1, 0
				}
			}
		}
	}
	if rate != s.was {
		if s.origin >= 0 {
			frac := 0.0
			if now > s.origin {
				frac = s.was*(now-s.origin)/1e6 - s.minted
			}
			back := 0.0
			if rate > 0 && frac > 0 {
				back = floor(math.Min(frac, 1) * 1e6 / rate)
			}
			s.origin, s.minted = math.Max(now-back, 0), 0
		}
		s.was = rate
	}
	unlimited := math.IsInf(s.was, 1)
	if unlimited {
		s.avail = burst - s.held - s.lcur - s.lprev
		s.origin, s.minted = -1, 0
	}
	waitfor := func(k float64) float64 {
		if s.origin < 0 || s.was <= 0 || k+s.held+s.lcur+s.lprev > burst {
			return -1
		}
		need := s.minted + k - s.avail
		e := ceil(need * 1e6 / s.was)
		if e < 1e15 {
			for range 3 {
				if floor(s.was*e/1e6) >= need {
					break
				}
				e++
			}
			for range 3 {
				if e <= 0 || floor(s.was*(e-1)/1e6) < need {
					break
				}
				e--
			}
		}
		return math.Min(math.Max(s.origin+e-now, 0), 1e15)
	}
	ok, w, kept := 0.0, 0.0, 0.0
	if s.avail < n {
		w = waitfor(n)
	}
	if op == "lease" {
		give := limit
		x := 0.0
		switch s.epoch {
		case from:
			x = math.Min(mine, s.lcur)
			s.lcur -= x
		case from + 1:
			x = math.Min(mine, s.lprev)
			s.lprev -= x
		}
		f := math.Min(m, x)
		x -= f
		s.avail -= m - f
		r := math.Min(give, x)
		x -= r
		s.avail += r
		kept = x
		s.lcur += x
		if n > 0 && s.avail >= 1 {
			ok = math.Min(n, s.avail)
			s.avail -= ok
			s.lcur += ok
		}
		w = 0
		if ok < n {
			w = waitfor(n - ok)
		}
		if s.origin < 0 && s.avail+s.held+s.lcur+s.lprev < burst {
			s.origin, s.minted = now, 0
		}
	}
	if unlimited {
		s.avail = burst - s.held - s.lcur - s.lprev
		s.origin, s.minted = -1, 0
	}
	leased := s.lcur + s.lprev
	if s.origin < 0 && s.held == 0 && leased == 0 {
		delete(b.buckets, key)
	}
	if op == "lease" {
		return pack(ok, s.avail, s.held+leased, now, w, s.epoch, kept), nil
	}
	return pack(ok, s.avail, s.held+leased, now, w), nil
}
