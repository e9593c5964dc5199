package rediscredit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The bucket's state is one string value of 40 bytes, five little-endian
// float64s packed by Lua's struct library (which parses and formats
// nothing), or 64 bytes, eight, while leases hold credit of the bucket;
// it is read and written only by the script below. In order:
//
//   - avail: credit available, in whole credits; negative while Spend calls
//     have claimed credit that has not accrued yet (they wait for it).
//   - held: credit reserved by TryReserve and not yet settled.
//   - origin: the server time, in microseconds, from which accrual runs;
//     -1 while the bucket is full and nothing accrues.
//   - minted: the credits added since origin.
//   - rate: the rate the bucket accrues at, in credits per second; +Inf
//     for no limit, at which the bucket is full at every call.
//   - lcur, lprev: credit reserved by leases (see lease.go), in two
//     generations: the current one, and the one before it. A generation
//     is one hold long (the Limiter's WithHold), numbered from the Unix
//     epoch: generation g spans [g·hold, (g+1)·hold) of the server's clock.
//   - epoch: the number of lcur's generation.
//
// Every field but rate holds a whole number below 2⁵³, exact in a float64.
// leased is lcur + lprev (0 for a 40-byte value). Invariants, after every
// call:
//
//  1. avail + held + leased ≤ burst;
//  2. origin = -1 exactly when avail + held + leased = burst, and then
//     minted = 0;
//  3. the credit due at time T ≥ origin is ⌊rate·(T−origin)/10⁶⌋ − minted:
//     the fraction of a credit not yet minted is kept between calls;
//  4. epoch is the generation of the call's time: at the first call of a
//     new generation lprev is dropped and lcur becomes lprev (two or more
//     generations on, or a clock that reads backwards, both are dropped).
//     Dropped credit is not given back to avail: it counts as spent, and
//     accrual refills the room it leaves at the rate, from the start of
//     the generation that dropped it (a bucket that was full until then
//     accrues from then, as a key that expired at the drop and came back
//     full once accrual had filled it would). A lease renews its
//     reservation into the current generation at every call, so only the
//     credit of a lease that has not called within a generation (its
//     process died, or lost Redis) is dropped, at least one hold after its
//     last call.
//
// A missing key is a full bucket at the Limiter's rate: a full bucket with
// nothing reserved or leased is deleted, and any other expires (PSETEX)
// when it would be full, or when its reservations' hold runs out if later;
// a key with leased credit lives until its last generation is dropped and
// accrual has filled the bucket after that, so that its expiry never gives
// back credit a lease took.
//
// Every call runs the same script on one key, so every call is one round
// trip (EVALSHA; EVAL once per server if the script is not cached there),
// and the script's reads and writes are atomic. The script reads the
// server's clock (TIME), so clients' clocks never matter.
//
// Its arguments are the Limiter's rate, burst and hold (in milliseconds)
// packed as three little-endian float64s, the operation, n, and, for the
// operations that use them, m and limit (for a lease: want, spent, give,
// mine and from); it answers five little-endian float64s, seven for a
// lease. Binary numbers both ways keep decimal parsing and formatting,
// a large share of a short script's time, out of every call.
const scriptSource = `
local floor, ceil = math.floor, math.ceil
local key = KEYS[1]
local rate, burst, hold = struct.unpack('<ddd', ARGV[1])
local op = ARGV[2]
local n = tonumber(ARGV[3])
local m, limit = 0, -1
if ARGV[4] then
  m, limit = tonumber(ARGV[4]), tonumber(ARGV[5])
end

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
-- Leased credit is counted in generations of one hold: span in µs, and
-- the number of the generation now.
local span = hold * 1000
local gen = floor(now / span)

local avail, held, origin, minted, was = burst, 0, -1, 0, rate
local lcur, lprev, epoch = 0, 0, gen
local v = redis.call('GET', key)
if v then
  if #v == 40 then
    avail, held, origin, minted, was = struct.unpack('<ddddd', v)
  elseif #v == 64 then
    avail, held, origin, minted, was, lcur, lprev, epoch = struct.unpack('<dddddddd', v)
  else
    return redis.error_reply('key ' .. key .. ' does not hold a credit bucket')
  end
end

-- Mint the credit due up to now at the rate the bucket accrued at; a clock
-- that reads backwards adds nothing.
if origin >= 0 and now > origin then
  local due = floor(was * (now - origin) / 1e6)
  if due > minted then
    avail = avail + due - minted
    minted = due
  end
end
if avail + held + lcur + lprev >= burst then
  -- Full: accrual stops, and the time spent full is not banked.
  avail = burst - held - lcur - lprev
  origin = -1
  minted = 0
elseif minted >= 2147483648 then
  -- Keeps rate·(now−origin) exact in a double; drops under a credit.
  origin = now
  minted = 0
end

-- A new generation drops the leased credit of the generation before the
-- last: no lease renewed it within a hold. It stays out of the balance
-- (it may have been spent), and the room it leaves refills by accrual,
-- from the start of the generation that dropped it (the later one, where
-- two were dropped), as if it had been dropped then.
if gen ~= epoch then
  local dropped = -1
  if gen == epoch + 1 then
    if lprev > 0 then
      dropped = gen * span
    end
    lprev, lcur = lcur, 0
  else
    if gen < epoch then
      dropped = now
    elseif lcur > 0 then
      dropped = (epoch + 2) * span
    elseif lprev > 0 then
      dropped = (epoch + 1) * span
    end
    lprev, lcur = 0, 0
  end
  epoch = gen
  if dropped >= 0 and origin < 0 and avail + held + lcur + lprev < burst then
    -- Full until the drop: accrual runs from it.
    origin = math.min(dropped, now)
    minted = 0
    if was > 0 and now > origin then
      minted = floor(was * (now - origin) / 1e6)
      avail = avail + minted
      if avail + held + lcur + lprev >= burst then
        avail = burst - held - lcur - lprev
        origin = -1
        minted = 0
      end
    end
  end
end

-- A change of rate: the accrual so far was minted at the old rate, and
-- the fraction of a credit accrued carries over as time at the new rate.
if rate ~= was then
  if origin >= 0 then
    local frac = 0
    if now > origin then
      frac = was * (now - origin) / 1e6 - minted
    end
    local back = 0
    if rate > 0 and frac > 0 then
      back = math.floor(math.min(frac, 1) * 1e6 / rate)
    end
    origin = math.max(now - back, 0)
    minted = 0
  end
  was = rate
end

-- An unlimited rate: the bucket is full at every look, less what is
-- reserved (and again after the operation, below).
local unlimited = was == math.huge
if unlimited then
  avail = burst - held - lcur - lprev
  origin = -1
  minted = 0
end

-- waitfor returns the wait of a request for k that the balance does not
-- cover: the microseconds until accrual alone covers k, or -1 if it never
-- will.
local function waitfor(k)
  if origin < 0 or was <= 0 or k + held + lcur + lprev > burst then
    return -1
  end
  -- The first microsecond e at which ⌊rate·e/10⁶⌋ reaches need: the
  -- division is off by at most one either way, and is fixed up where a
  -- microsecond is still representable; the wait is capped at 10¹⁵ µs
  -- (31 years), so that it is a whole number for Redis.
  local need = minted + k - avail
  local e = ceil(need * 1e6 / was)
  if e < 1e15 then
    for _ = 1, 3 do
      if floor(was * e / 1e6) >= need then
        break
      end
      e = e + 1
    end
    for _ = 1, 3 do
      if e <= 0 or floor(was * (e - 1) / 1e6) < need then
        break
      end
      e = e - 1
    end
  end
  return math.min(math.max(origin + e - now, 0), 1e15)
end

local ok, w, kept = 0, 0, 0
if avail < n then
  w = waitfor(n)
end

-- A spend from a full bucket starts accrual anew.
if op == 'spend' or op == 'claim' then
  if avail >= n then
    avail = avail - n
    if origin < 0 then
      origin = now
      minted = 0
    end
    ok = 1
  elseif op == 'claim' and w >= 0 and (limit < 0 or w <= limit) then
    avail = avail - n
    ok = 2
  end
elseif op == 'unclaim' then
  avail = math.min(avail + n, burst - held - lcur - lprev)
  if avail + held + lcur + lprev >= burst then
    origin = -1
    minted = 0
  end
elseif op == 'reserve' then
  if avail >= n then
    avail = avail - n
    held = held + n
    ok = 1
  end
elseif op == 'settle' then
  -- n is given back and m spent; whatever exceeds what is held was held
  -- by a bucket the server has since lost (or let expire): what is given
  -- back of it is dropped, and what is spent of it comes out of the
  -- balance.
  local r = math.min(n, held)
  held = held - r
  avail = avail + r
  local f = math.min(m, held)
  held = held - f
  local take = math.max(math.min(m - f, avail), 0)
  avail = avail - take
  if f + take > 0 and origin < 0 then
    origin = now
    minted = 0
  end
elseif op == 'lease' then
  -- A lease's call (see lease.go): n is the credit it wants added, m the
  -- credit it spent since its last call; give is credit it gives back,
  -- mine the credit it reserves as it knows, in generation from. Its
  -- reservation comes out of that generation, as much of it as is still
  -- there; spent credit comes out of it first, and what the reservation
  -- no longer holds comes out of the balance, below zero if need be, so
  -- that credit spent is never counted as unspent; the credit given back
  -- goes to the balance; the rest, kept, moves to the current generation,
  -- with what the balance grants of n.
  local give, mine, from = limit, tonumber(ARGV[6]), tonumber(ARGV[7])
  local x = 0
  if from == epoch then
    x = math.min(mine, lcur)
    lcur = lcur - x
  elseif from == epoch - 1 then
    x = math.min(mine, lprev)
    lprev = lprev - x
  end
  local f = math.min(m, x)
  x = x - f
  avail = avail - (m - f)
  local r = math.min(give, x)
  x = x - r
  avail = avail + r
  kept = x
  lcur = lcur + x
  if n > 0 and avail >= 1 then
    ok = math.min(n, avail)
    avail = avail - ok
    lcur = lcur + ok
  end
  w = 0
  if ok < n then
    w = waitfor(n - ok)
  end
  if origin < 0 and avail + held + lcur + lprev < burst then
    origin = now
    minted = 0
  end
end

if unlimited then
  avail = burst - held - lcur - lprev
  origin = -1
  minted = 0
end

local leased = lcur + lprev
if origin < 0 and held == 0 and leased == 0 then
  if v then
    redis.call('DEL', key)
  end
else
  local state
  if leased > 0 then
    state = struct.pack('<dddddddd', avail, held, origin, minted, was, lcur, lprev, epoch)
  else
    state = struct.pack('<ddddd', avail, held, origin, minted, was)
  end
  local ttl = -1
  if origin < 0 then
    ttl = hold
  elseif was > 0 then
    local need = minted + burst - held - avail
    -- A rate so low that the bucket fills in more than 30,000 years keeps
    -- its key that long, so that the TTL stays a whole number for Redis.
    ttl = math.min(ceil((origin + ceil(need * 1e6 / was) - now) / 1000) + 1, 1e15)
    if held > 0 then
      ttl = math.max(ttl, hold)
    end
  end
  if leased > 0 then
    if was > 0 then
      -- The key outlives the drop of its last generation by the time
      -- accrual takes to fill the bucket from its balance after it.
      local fill = 0
      if not unlimited then
        fill = ceil((burst - held - avail) * 1e6 / was)
      end
      ttl = math.max(ttl, math.min(ceil(((epoch + 2) * span - now + fill) / 1000) + 1, 1e15))
    else
      -- At a rate of 0 dropped credit never comes back: the key stays.
      ttl = -1
    end
  end
  if ttl > 0 then
    redis.call('PSETEX', key, ttl, state)
  else
    redis.call('SET', key, state)
  end
end
if op == 'lease' then
  return struct.pack('<ddddddd', ok, avail, held + leased, now, w, epoch, kept)
end
return struct.pack('<ddddd', ok, avail, held + leased, now, w)
`

var (
	script = redis.NewScript(scriptSource)
	// scriptSHA is the script's digest, boxed once.
	scriptSHA any = script.Hash()
)

// The script's operations, boxed once, so that a call does not allocate
// them.
var (
	opSpend   any = "spend"
	opClaim   any = "claim"
	opUnclaim any = "unclaim"
	opReserve any = "reserve"
	opSettle  any = "settle"
	opStats   any = "stats"
	opLease   any = "lease"
)

// processor runs any command: *redis.Client, *redis.ClusterClient and
// *redis.Ring do.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// reply is the script's answer.
type reply struct {
	ok       int64 // 0: refused; 1: done; 2: claimed, due after wait; for a lease, the credit granted
	avail    int64
	held     int64 // reserved by reservations and leases
	now      time.Time
	wait     time.Duration // -1: accrual alone never covers the request
	nowMicro int64
	epoch    int64 // a lease's: the generation its reservation is in now
	kept     int64 // a lease's: the credit of its reservation kept, before the grant
}

// run calls the script once on key. m and limit matter only to the
// operations that use them; limit is in microseconds, -1 for none.
//
// The script answers one string of five little-endian float64s, each a
// whole number (ok, avail, held, now, wait), which a typed command reads
// without boxing each value.
func (l *Limiter) run(ctx context.Context, op any, key string, n, m, limit int64) (reply, error) {
	var args []any
	if m == 0 && limit == -1 {
		args = []any{"evalsha", scriptSHA, 1, key, l.rate.Load().params, op, n}
	} else {
		args = []any{"evalsha", scriptSHA, 1, key, l.rate.Load().params, op, n, m, limit}
	}
	return l.send(ctx, args, 40)
}

// runLease makes a lease's call on key: it settles spent credit of the
// lease's reservation of mine in generation from, gives back give, keeps
// the rest, and asks for want more (see the script).
func (l *Limiter) runLease(ctx context.Context, key string, want, spent, give, mine, from int64) (reply, error) {
	return l.send(ctx, []any{"evalsha", scriptSHA, 1, key, l.rate.Load().params, opLease, want, spent, give, mine, from}, 56)
}

// send sends args and decodes the script's answer of size bytes.
func (l *Limiter) send(ctx context.Context, args []any, size int) (reply, error) {
	v, err := l.call(ctx, args)
	if err != nil {
		return reply{}, classify(ctx, err)
	}
	if len(v) != size {
		return reply{}, fmt.Errorf("rediscredit: the script answered %d bytes, not %d", len(v), size)
	}
	r := reply{ok: word(v, 0), avail: word(v, 1), held: word(v, 2), nowMicro: word(v, 3), wait: -1}
	r.now = time.UnixMicro(r.nowMicro)
	if w := word(v, 4); w >= 0 {
		r.wait = time.Duration(w) * time.Microsecond
	}
	if size > 40 {
		r.epoch, r.kept = word(v, 5), word(v, 6)
	}
	return r, nil
}

// call sends args, an EVALSHA of the script, and returns the script's
// answer. A server that does not hold the script (new, restarted, or
// flushed) answers NOSCRIPT, and the call is sent again as EVAL, with the
// source, which caches it there.
func (l *Limiter) call(ctx context.Context, args []any) (string, error) {
	if l.proc == nil {
		return script.Run(ctx, l.client, []string{args[3].(string)}, args[4:]...).Text()
	}
	cmd := redis.NewStringCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	err := l.proc.Process(ctx, onceCmd{cmd})
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		args[0], args[1] = "eval", scriptSource
		cmd = redis.NewStringCmd(ctx, args...)
		cmd.SetFirstKeyPos(3)
		err = l.proc.Process(ctx, onceCmd{cmd})
	}
	return cmd.Val(), err
}

// onceCmd is a command that the client sends at most once: go-redis
// retries a command whose connection failed (MaxRetries), and a request
// whose answer was lost may have been applied, so that a second one would
// spend, claim or give back its credit twice. The call fails instead, with
// ErrUnavailable, at once rather than after the client's retries. (A
// NOSCRIPT answer is not a failure: call sends EVAL then.)
type onceCmd struct{ *redis.StringCmd }

// NoRetry tells go-redis not to send the command again.
func (onceCmd) NoRetry() bool { return true }

// word returns the i-th little-endian float64 of s as an integer.
func word(s string, i int) int64 {
	var u uint64
	for j := 7; j >= 0; j-- {
		u = u<<8 | uint64(s[8*i+j])
	}
	return int64(math.Float64frombits(u))
}

// classify turns a failed round trip into the error a caller sees: an
// error reply from the server as it is; ctx.Err() if ctx was cancelled
// (the caller gave up); and anything else, a round trip that ctx's
// deadline ended included, as ErrUnavailable, wrapping the deadline's
// error too, so that it matches context.DeadlineExceeded.
func classify(ctx context.Context, err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) && !unavailableReply(rerr.Error()) {
		return fmt.Errorf("rediscredit: %w", err)
	}
	ctxErr := ctx.Err()
	if dl, ok := ctx.Deadline(); ok && ctxErr == nil && !time.Now().Before(dl) {
		// The socket's deadline, set to ctx's, can pass before ctx's own
		// timer has fired.
		ctxErr = context.DeadlineExceeded
	}
	switch {
	case ctxErr == nil:
	case !errors.Is(ctxErr, context.DeadlineExceeded):
		return ctxErr
	case !errors.Is(err, ctxErr):
		return fmt.Errorf("%w: %w: %w", ErrUnavailable, ctxErr, err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// unavailableReply reports whether an error reply says the server cannot
// serve now, rather than that the request was wrong.
func unavailableReply(msg string) bool {
	for _, p := range []string{"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
