// Package adaptiveotel publishes an adaptive Limiter's state
// (github.com/atomicsem/atomicsem/adaptive) as OpenTelemetry metrics: the
// limit, the requests in flight and waiting, the requests' durations and
// their count by outcome, so that a dashboard shows the limit follow the
// load without a collector of your own.
//
// It is a module of its own, so that the core module does not depend on
// OpenTelemetry.
//
// One call to Register creates the instruments on a metric.Meter, one
// callback that reads Limiter.Stats once per collection, and the limiter's
// observer (Limiter.Observe), which records each request's duration as it
// ends. It starts no goroutine. The Registration it returns stops the
// reporting. A limiter is registered once at a time: a second Register
// while the first is live would count every request twice, and is refused
// with an error that errors.Is reports as adaptive.ErrObserved.
//
// # Instruments
//
//	name                                 kind                            unit       attributes
//	-----------------------------------  ------------------------------  ---------  ---------------
//	atomicsem.adaptive.limit             Int64ObservableUpDownCounter    {request}  limiter.name
//	atomicsem.adaptive.in_flight         Int64ObservableUpDownCounter    {request}  limiter.name
//	atomicsem.adaptive.waiting           Int64ObservableUpDownCounter    {request}  limiter.name
//	atomicsem.adaptive.request.duration  Float64Histogram                s          limiter.name, outcome
//	atomicsem.adaptive.requests          Int64ObservableCounter          {request}  limiter.name, outcome
//
// limit is the limit in force; in_flight the requests admitted and not yet
// ended (briefly above limit after the limit falls, while the requests
// admitted under the higher one finish); waiting the Acquire calls waiting
// for a slot. They are up-down counters, as the semantic conventions make
// http.server.active_requests, since their sum over several limiters means
// something. request.duration is the time from each admitted request's
// admission to its end (its round trip), with buckets from 5 ms to 10 s,
// those the semantic conventions advise for HTTP durations (a View
// replaces them); recording it is the only cost on a request's path, one
// histogram measurement as the permit ends. requests counts the requests by
// how they ended: outcome is "succeeded", "dropped" or "ignored" for a
// request admitted and ended so, and "rejected" for one that TryAcquire
// found no slot for (shed); it counts from the limiter's creation, whether
// or not it was registered.
//
// The attributes are namespaced with the instruments, as the semantic
// conventions ask of attributes no other instrument uses:
// atomicsem.adaptive.limiter.name carries the name given with WithName,
// atomicsem.adaptive.outcome the outcome; WithAttributes adds more.
package adaptiveotel
