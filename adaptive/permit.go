package adaptive

import (
	"strconv"
	"time"

	"github.com/atomicsem/atomicsem/token"
)

// Permit is one admitted request's slot under a Limiter's limit. It ends in
// exactly one of four ways (or through End, which names the way), each of
// which frees the slot:
//
//   - Succeeded: the request completed; its round-trip time, measured from
//     the acquire, is a sample for the controller.
//   - Dropped: the request failed in a way that signals overload (it timed
//     out, or a downstream service answered with a rate-limit or overload
//     status); the controller backs off.
//   - Ignored: the outcome says nothing about load (a client error, a
//     cancelled request); the controller does not see it.
//   - Inconclusive: the request ended without a verdict of its own on load
//     (its client went away, its deadline passed, the server failed): it
//     counts as Dropped if it lasted longer than the limiter's latency
//     bound, having waited where the service keeps no request that long,
//     and as Ignored otherwise (see WithLatencyBound).
//
// A Permit is filled in by Limiter.Acquire or Limiter.TryAcquire, into a
// variable the caller declares; once ended it may be filled in again. It
// must not be copied (it holds a token.Token; go vet reports copies): pass a
// *Permit. It belongs to one goroutine at a time.
//
// The zero Permit holds nothing. It is a run-time error to end a Permit
// that is not live (the zero Permit, or one already ended), or to acquire
// into one that is; the panic message begins "adaptive: ", and the limiter
// is left unchanged.
type Permit struct {
	l          *Limiter
	tok        token.Token
	inFlight   int64         // l.sem's held permits at admission, this one included
	turnedAway uint64        // l.turnedAway at admission
	start      time.Duration // since l.epoch
}

// Succeeded ends the permit as a completed request and frees its slot.
func (p *Permit) Succeeded() { p.end(false) }

// Dropped ends the permit as a request that timed out or was refused for
// overload, and frees its slot.
func (p *Permit) Dropped() { p.end(true) }

// Ignored ends the permit without a sample for the controller and frees
// its slot.
func (p *Permit) Ignored() {
	l := p.take()
	p.tok.Release()
	l.ignore()
	if ob := l.obs.Load(); ob != nil {
		ob.f(Ignored, time.Since(l.epoch)-p.start)
	}
}

// Inconclusive ends the permit as a request that ended without a verdict
// of its own on load, and frees its slot: the limiter counts it as Dropped
// if it lasted longer than the latency bound (see WithLatencyBound), and
// as Ignored otherwise; an observer (see Limiter.Observe) sees the outcome
// it was counted as.
func (p *Permit) Inconclusive() {
	l := p.take()
	s := p.sample(l, false)
	p.tok.Release()
	o := l.inconclusive(s)
	if ob := l.obs.Load(); ob != nil {
		ob.f(o, s.RTT)
	}
}

// Start returns when the permit was acquired; the zero time for the zero
// Permit or one already ended. It is a run-time error to call it on a nil
// Permit.
func (p *Permit) Start() time.Time {
	if p == nil {
		panic(errNilPermit)
	}
	if p.l == nil {
		return time.Time{}
	}
	return p.l.epoch.Add(p.start)
}

// end frees the slot, then gives the sample to the controller: the slot is
// free before the limiter's lock is taken, so a request that waits for it
// does not wait for the controller too.
func (p *Permit) end(dropped bool) {
	l := p.take()
	s := p.sample(l, dropped)
	p.tok.Release()
	l.record(s)
	if ob := l.obs.Load(); ob != nil {
		o := Succeeded
		if dropped {
			o = Dropped
		}
		ob.f(o, s.RTT)
	}
}

// sample returns the sample of the permit, ending now, of limiter l.
func (p *Permit) sample(l *Limiter, dropped bool) Sample {
	return Sample{Start: l.epoch.Add(p.start), RTT: time.Since(l.epoch) - p.start, InFlight: p.inFlight,
		Limited: l.turnedAway.Load() != p.turnedAway, Dropped: dropped}
}

// take marks the permit ended and returns its limiter, or panics if the
// permit was not live.
func (p *Permit) take() *Limiter {
	if p == nil {
		panic(errNilPermit)
	}
	l := p.l
	if l == nil {
		panic(errEnded)
	}
	p.l = nil
	return l
}

// mustBeFree panics if p is live: acquiring into it would lose its slot.
func (p *Permit) mustBeFree() {
	if p == nil {
		panic(errNilPermit)
	}
	if p.l != nil {
		panic(errLive)
	}
}

// permitMisuse is the panic value of misusing a Permit.
type permitMisuse string

func (m permitMisuse) Error() string { return string(m) }

var (
	errEnded     error = permitMisuse("adaptive: ending a Permit that is not live (the zero Permit, or one already ended)")
	errLive      error = permitMisuse("adaptive: acquiring into a live Permit")
	errNilPermit error = permitMisuse("adaptive: nil *Permit")
)

// Outcome is how a request ended, for Permit.End and the HTTP helpers.
type Outcome uint8

const (
	// Succeeded is a completed request; its RTT is a sample.
	Succeeded Outcome = iota
	// Dropped is a request that timed out or was refused for overload.
	Dropped
	// Ignored is a request whose outcome says nothing about load.
	Ignored
	// Inconclusive is a request that ended without a verdict of its own
	// on load: Dropped if it lasted longer than the limiter's latency
	// bound, Ignored otherwise.
	Inconclusive
)

// String returns the outcome's name: "Succeeded", "Dropped", "Ignored" or
// "Inconclusive".
func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "Succeeded"
	case Dropped:
		return "Dropped"
	case Ignored:
		return "Ignored"
	case Inconclusive:
		return "Inconclusive"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// End ends the permit with outcome o: Succeeded, Dropped, Ignored or
// Inconclusive, as the methods of those names do. Any other value counts
// as Ignored.
func (p *Permit) End(o Outcome) {
	switch o {
	case Succeeded:
		p.Succeeded()
	case Dropped:
		p.Dropped()
	case Inconclusive:
		p.Inconclusive()
	default:
		p.Ignored()
	}
}
