// Package wire runs adaptive concurrency limits through the real stack:
// a Backend served over HTTP on the loopback interface (or over gRPC, by a
// Stack of the caller's), an open-loop load of clients with real timeouts,
// deadlines and cancellations, and a Limiter in the place a deployment puts
// it (Handler: adaptive.Handler on the server; Transport:
// adaptive.Transport on the client).
//
// Each Scenario runs a limiter beside a fixed limit, the reference, each
// with a Backend and a Stack of its own and the same arrivals, and judges
// the limiter by ratios of its figures to the reference's (goodput, p99,
// the requests a failure held, the goodput once it is over). Scenarios
// returns the standard ones: the failures package adaptivetest simulates in
// fake time, and those that only the real stack shows (a hang that only
// the client's timeout ends, errors answered faster than the service
// time, a latency step, quiet hours, deadlines shorter than the service
// time).
//
// A run takes its phases' length in real time and some CPU time of both
// the clients and the servers: on a machine shared with other work, the
// ratios hold where the figures themselves move.
package wire
