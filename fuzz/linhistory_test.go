package fuzz_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/internal/model"
	"github.com/atomicsem/atomicsem/token"
)

// linConfig describes one history to record.
type linConfig struct {
	seed    uint64
	barging bool
	clients int
	minOps  int // operations per client, drawn from [minOps, maxOps]
	maxOps  int
}

// linHistory is a recorded history and the semaphore it ran on.
type linHistory struct {
	initial, max int64
	ops          []porcupine.Operation
	panics       []string // operations that panicked, each ending its client
}

// acquireTimeouts are the deadlines a blocking Acquire is given. Every
// Acquire with a live context has one, so no client can wait forever; the
// short ones make cancellations race grants.
var acquireTimeouts = []time.Duration{
	20 * time.Microsecond,
	100 * time.Microsecond,
	500 * time.Microsecond,
	2 * time.Millisecond,
}

// recordHistory runs cfg.clients goroutines against a fresh semaphore, each
// issuing random operations chosen from cfg.seed, and returns every
// operation with call and return times from one shared counter.
func recordHistory(cfg linConfig) linHistory {
	rng := rand.New(rand.NewPCG(cfg.seed, 0))
	maxP := 1 + rng.Int64N(6)
	h := linHistory{initial: rng.Int64N(maxP + 1), max: maxP}
	var opts []atomicsem.Option
	if cfg.barging {
		// A bound short enough that starving mode comes and goes within a
		// history.
		opts = append(opts, atomicsem.WithBarging(), atomicsem.WithStarvationBound(50*time.Microsecond))
	}
	sem, err := atomicsem.New(h.initial, h.max, opts...)
	if err != nil {
		panic(err) // initial ≤ max ≤ 6 by construction
	}
	mayClose := rng.IntN(4) == 0

	var (
		clock   atomic.Int64
		wg      sync.WaitGroup
		clients = make([]*linClient, cfg.clients)
		start   = make(chan struct{})
	)
	for id := range cfg.clients {
		c := &linClient{
			id:       id,
			sem:      sem,
			max:      h.max,
			rng:      rand.New(rand.NewPCG(cfg.seed, uint64(id)+1)),
			clock:    &clock,
			mayClose: mayClose,
		}
		clients[id] = c
		n := cfg.minOps + c.rng.IntN(cfg.maxOps-cfg.minOps+1)
		wg.Go(func() {
			<-start
			c.run(n)
		})
	}
	// Start the clients together, or the first could be done before the
	// last begins.
	close(start)
	wg.Wait()
	for _, c := range clients {
		h.ops = append(h.ops, c.ops...)
		if c.panicked != "" {
			h.panics = append(h.panics, fmt.Sprintf("client %d: %s", c.id, c.panicked))
		}
	}
	return h
}

// linClient is one goroutine of a history, with the tokens it holds.
type linClient struct {
	id       int
	sem      *atomicsem.Semaphore
	max      int64
	rng      *rand.Rand
	clock    *atomic.Int64
	mayClose bool
	held     []*token.Token
	ops      []porcupine.Operation
	panicked string // the operation that panicked and its panic value
}

// run issues n random operations, then releases the tokens still held. It
// stops early if an operation panics.
func (c *linClient) run(n int) {
	for i := 0; i < n && c.panicked == ""; i++ {
		c.randomOp()
	}
	for len(c.held) > 0 && c.panicked == "" {
		c.end(opRelease)
	}
}

// randomOp issues one operation with weights that keep permits moving:
// about as many ends of tokens as acquires.
func (c *linClient) randomOp() {
	switch r := c.rng.IntN(100); {
	case r < 30:
		c.acquire()
	case r < 44:
		n := c.request()
		c.do(linInput{op: opTryAcquire, n: n}, func() linOutput {
			tok, ok := c.sem.TryAcquire(n)
			if ok {
				c.held = append(c.held, &tok)
			}
			return linOutput{ok: ok}
		})
	case r < 66 && len(c.held) > 0:
		c.end(opRelease)
	case r < 71 && len(c.held) > 0:
		c.end(opForget)
	case r < 79:
		n := c.rng.Int64N(c.max + 2)
		c.do(linInput{op: opTryRelease, n: n}, func() linOutput {
			return linOutput{ok: c.sem.TryRelease(n)}
		})
	case r < 87:
		limit := c.rng.Int64N(c.max+3) - 1 // −1 and max+1 are refused
		c.do(linInput{op: opSetLimit, n: limit}, func() linOutput {
			return linOutput{outcome: outcomeOrPanic(c.sem.SetLimit(limit))}
		})
	case r < 88 && c.mayClose && c.id == 0:
		c.do(linInput{op: opClose}, func() linOutput {
			c.sem.Close()
			return linOutput{}
		})
	default:
		c.do(linInput{op: opStats}, func() linOutput {
			return linOutput{stats: c.sem.Stats()}
		})
	}
}

// request returns a request size: mostly within the maximum, now and then
// one more (ErrExceedsMax) or negative (ErrInvalidPermits).
func (c *linClient) request() int64 {
	switch c.rng.IntN(20) {
	case 0:
		return c.max + 1
	case 1:
		return -1
	}
	return c.rng.Int64N(c.max + 1)
}

// acquire issues an Acquire with a context that is done at the call or
// expires after one of acquireTimeouts.
func (c *linClient) acquire() {
	n := c.request()
	in := linInput{op: opAcquire, n: n}
	var (
		ctx    context.Context
		cancel context.CancelFunc
	)
	if c.rng.IntN(10) == 0 {
		ctx, cancel = context.WithCancel(context.Background())
		cancel()
		in.ctxDone, in.ctx = true, "done"
	} else {
		d := acquireTimeouts[c.rng.IntN(len(acquireTimeouts))]
		ctx, cancel = context.WithTimeout(context.Background(), d)
		in.ctx = "timeout " + d.String()
	}
	defer cancel()
	c.do(in, func() linOutput {
		tok, err := c.sem.Acquire(ctx, n)
		if err == nil {
			c.held = append(c.held, &tok)
		}
		return linOutput{outcome: outcomeOrPanic(err)}
	})
}

// end releases or forgets one of the client's tokens, chosen at random.
func (c *linClient) end(op linOp) {
	i := c.rng.IntN(len(c.held))
	tok := c.held[i]
	c.held = append(c.held[:i], c.held[i+1:]...)
	c.do(linInput{op: op, n: tok.Permits()}, func() linOutput {
		if op == opForget {
			tok.Forget()
		} else {
			tok.Release()
		}
		return linOutput{}
	})
}

// do runs f as one operation of the history, stamped with the shared clock
// right before the call and right after the return. A panic is recorded in
// c.panicked instead of the operation, so that the test can report it with
// the history's seed.
func (c *linClient) do(in linInput, f func() linOutput) {
	defer func() {
		if v := recover(); v != nil {
			c.panicked = fmt.Sprintf("%s panicked: %v", describeLinOp(in, linOutput{}), v)
		}
	}()
	call := c.clock.Add(1)
	out := f()
	ret := c.clock.Add(1)
	c.ops = append(c.ops, porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: out, Return: ret})
}

// outcomeOrPanic maps err to the model's outcome. An error outside the
// contract cannot be expressed in a history, so it stops the run loudly.
func outcomeOrPanic(err error) model.Outcome {
	o, ok := outcomeOf(err)
	if !ok {
		panic("unexpected error from the semaphore: " + err.Error())
	}
	return o
}
