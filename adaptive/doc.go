// Package adaptive provides adaptive concurrency limits: a Limiter whose
// limit on requests in flight a Controller moves at run time from the
// latency and the drops it observes, enforced by an atomicsem.Semaphore.
//
// # Model
//
// A request takes a Permit from the Limiter, waiting for one with Acquire
// or shedding the request when TryAcquire finds none free, and ends it with
// Succeeded, Dropped, Ignored or Inconclusive (the Outcome constants of the
// same names name them for End). Succeeded and Dropped are samples: the
// round trip time (RTT) measured from the acquire, the number of requests
// then in flight, and whether the request was dropped (a timeout, an
// overload error, a 429 or 503 from downstream). Inconclusive is a request
// that ended without a verdict of its own on load (its client went away,
// its deadline passed, the server failed): a drop if it lasted longer than
// the latency bound, having waited where the service keeps no request that
// long, and ignored otherwise (see WithLatencyBound). The Controller turns
// the samples into the next limit, which the Limiter keeps within [min,
// max] and applies to the semaphore with SetLimit. Lowering the limit
// never revokes a permit already out: the requests in flight finish, and
// new ones are admitted only once fewer than the new limit remain. The
// semaphore
// admits a request only while the permits out are below the limit in
// force at that moment, in one compare-and-swap, so no race of concurrent
// acquires can admit more.
//
// # Controllers
//
// The package provides three controllers, after Netflix's
// concurrency-limits library (github.com/Netflix/concurrency-limits, the
// AIMDLimit, VegasLimit and Gradient2Limit classes), which defined the
// field:
//
//   - AIMD: loss-based; additive increase, multiplicative decrease on drops
//     and on RTTs above a timeout, which the caller sets a tenth above the
//     typical request's latency. Inputs: drops, RTT.
//   - Vegas: delay-based, after TCP Vegas; keeps the queue it estimates from
//     the unloaded RTT and the current one between two thresholds. Inputs:
//     RTT, an unloaded RTT measured in probes at a lower limit, drops.
//     Netflix's version takes the smallest RTT seen as the unloaded one,
//     which a service queued from the start never shows; this one
//     measures it as Gradient2 measures its baseline: see Vegas.
//   - Gradient2: delay-based; scales the limit by the ratio of a baseline
//     RTT to the current one, with headroom to grow. Inputs: RTT, a baseline
//     measured in probes, drops. Netflix's version grows without bound under
//     modest overload (Netflix/concurrency-limits#134); this one measures
//     its baseline as Envoy's adaptive concurrency filter does (a probe at a
//     lower limit, see Envoy's documentation of the
//     envoy.filters.http.adaptive_concurrency filter) and settles: see
//     Gradient2.
//
// All three decide once per window of samples, not once per sample, as TCP
// does once per round trip and as Netflix's WindowedLimit lets its
// controllers do. A change of the limit shows in the RTTs only of requests
// admitted after it, a round trip later; a controller that acted on every
// sample would keep reacting, for that whole round trip, to the state its
// last change already corrected, overshooting on the way up and collapsing
// on the way down. So a window holds only the samples of requests admitted
// since the last decision, and closes once it has half a limit's worth of
// them (at least 1, at most 100). Gradient2 and Vegas raise a limit only
// when the requests filled it (Sample.Limited, or as many in flight as it
// allows), as TCP raises a window only when the window, not the sender,
// bounded the data in flight: a limit nobody reaches says nothing about
// the service, and one raised on the strength of fast requests alone is
// found too high only once the slow ones catch up. Their settings are
// exported fields, whose zero values are the defaults; a Controller of your
// own is any type with a Next method. Go ports of the same algorithms are
// platinummonkey/go-concurrency-limits and failsafe-go's adaptivelimiter
// (a Gradient2-like limiter); docs/adaptive.md compares them with this
// package in one simulation.
//
// # HTTP
//
// Handler sheds the requests a server cannot take with 503 Service
// Unavailable, and Transport limits a client's requests to a server,
// backing off when the server answers 429 or 503 or times out. The writer
// Handler hands on has exactly the optional interfaces of the one it got,
// and http.ResponseController answers through it as it would without it.
// Put Handler inside http.TimeoutHandler, whose own goroutine would
// otherwise outlive the permit: http.TimeoutHandler(Handler(lim, next), d).
//
// # Outcomes
//
// How a request that a transport's limiter admitted ends, by default, in
// the order the rules are tried (the first that matches decides):
//
//	what happened                          Handler / Transport    gRPC interceptors
//	the request's context ended first:     Inconclusive           Inconclusive
//	  the client went away, or a
//	  deadline passed (an answer given
//	  after it is too late to count)
//	an overload answer: 429, 503, 504;     Dropped                Dropped
//	  ResourceExhausted, Unavailable,
//	  DeadlineExceeded of a call behind
//	any other error of the round trip      - / Dropped            -
//	  (a network timeout, a refused or
//	  reset connection)
//	a server error: any other 5xx;         Inconclusive           Inconclusive
//	  Unknown, Internal, DataLoss,
//	  Unimplemented, Canceled
//	any other answer, 4xx included,        Succeeded              Succeeded
//	  or none (a 200)
//	the handler panicked                   Ignored / -            Ignored
//
// Inconclusive counts as Dropped if the request lasted longer than the
// Limiter's latency bound and as Ignored otherwise: a client whose own
// deadline is shorter than the service's latency, or who leaves early, says
// nothing about load, while one who gave up on a request that waited past
// the bound, or a deadline that such a request reached, is the overload a
// limiter is for; and a server that fails may fail at once, so the time of
// its failures is no sample of its latency. The bound is about four times
// the latency of a request that does not queue, as the controller measures
// it, or what WithLatencyBound sets. Any other status is a sample of the
// service's latency: the server did the request's work. Handler's rule is
// ClassifyServer and Transport's ClassifyClient; WithClassifier and
// Transport.Classify replace them with a function of the caller's, which
// may call them for the cases it leaves alone. A Transport ends the permit
// of a 101 Switching Protocols response at once, as the end of the
// upgrade's round trip. The gRPC interceptors, in a module of their own,
// shed with ResourceExhausted.
//
// # Code of the caller's
//
// A Controller's Next, Handler's classifier and the rejection handler,
// Transport's Base, its Classify and its response bodies, and an observer
// run as the caller's code inside the package's, and may panic. None of
// them leaves a permit taken or the limiter's lock held: a permit ends in
// a defer, Ignored unless a verdict came first, and the lock is released
// in one. The panic goes on to the caller, as net/http's server and the
// sync package's users expect.
//
// # Observability
//
// Limiter.Stats returns the limit, the requests in flight and waiting, the
// last RTT and counts of the outcomes, for metrics; the Limiter example
// publishes them with expvar. Limiter.Observe tells a function of each
// permit's end, with its outcome and RTT, for a latency histogram (package
// adaptiveotel's).
//
// # Priorities and backing off
//
// Package overload's pieces work with the limit this package moves:
//
//   - WithGate makes a Limiter enforce its limit with an overload.Gate, whose
//     classes share the limit the controller moves, each with its guaranteed
//     share and its ceiling. A request is admitted for the class its context
//     carries (overload.ContextWithClass; TryAcquireContext, Acquire), and
//     Handler takes it from the request's X-Request-Class field when the
//     context has none.
//   - Transport.Throttle rejects a client's requests locally in the share its
//     server has been rejecting them (overload.Throttle, the Google SRE
//     rule), with ErrThrottled, and Transport.MaxRetryAfter makes it honour
//     a 429's or 503's Retry-After, refusing requests until then with a
//     *RetryAfterError: so a fleet of clients backs off before the server
//     must shed. Both refuse before the Limiter and the network, and match
//     ErrLimited.
//   - Transport sends the class of a request's context in the X-Request-Class
//     field (Transport.ClassHeader), so that a class set once at the edge
//     travels with the calls made on the request's behalf.
//
// docs/overload.md describes the model and the experiments.
package adaptive
