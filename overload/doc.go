// Package overload decides, when a service has more requests than it can
// take, who is shed, who waits and for how long, and lets clients back off
// before the service has to shed.
//
//   - Gate is a concurrency limit shared by classes of requests in priority
//     order, each with a guaranteed share of the limit and a bound on what
//     it may borrow of the shares others leave idle, decided for each
//     request in one atomic step; its waiters are served by priority,
//     in arrival order within a class, with a bound on how long a lower
//     class can starve, and under a queue discipline: a bounded queue, a
//     maximum wait, an overload mode after CoDel that serves the newest
//     first and drops the oldest, and refusal at once of a request whose
//     deadline comes before its expected wait. Its limit may be fixed or
//     moved at run time with SetLimit, as adaptive's Limiter moves one
//     given to it with adaptive.WithGate.
//   - Middleware admits HTTP requests through a Gate by a class carried in
//     a header field or computed by a function; a Classifier finds the
//     class and answers a refusal as it does, for middleware that admits
//     through gates of its own, as keyed's GatesMiddleware does through a
//     gate per key (keyed.Gates, which drops the gates that Gate.Idle
//     reports to be a new gate's twins).
//   - Throttle is client-side adaptive throttling, the Google SRE rule: a
//     client rejects locally the share of its requests that its backend
//     would reject. adaptive.Transport (its Throttle field) and package
//     adaptivegrpc's client interceptors (WithThrottle) use one.
//
// A class travels with a request in its context (ContextWithClass): from
// there adaptive.Transport sends it in the X-Request-Class header field
// and adaptivegrpc's client interceptors in the x-request-class metadata,
// and Middleware, adaptive.Handler and adaptivegrpc's server interceptors
// put the class they receive into the handler's context.
//
// See the Gate type for the exact semantics of shares, borrowing, the
// service order, the starvation bound and the queue discipline, and
// docs/overload.md for the experiments behind them.
package overload
