// Package adaptiveotel publishes an adaptive Limiter's state
// (github.com/atomicsem/atomicsem/adaptive) as OpenTelemetry metrics: the
// limit, the requests in flight and waiting, the last round-trip time and
// the count of requests by outcome, so that a dashboard shows the limit
// follow the load without a collector of your own.
//
// It is a module of its own, so that the core module does not depend on
// OpenTelemetry.
//
// One call to Register creates the instruments on a metric.Meter and one
// callback that reads Limiter.Stats once per collection; it starts no
// goroutine, and costs the requests nothing, since the Limiter counts its
// outcomes whether or not anyone reads them. The Registration it returns
// stops the reporting.
//
// # Instruments
//
//	name                          kind                     unit       attributes
//	----------------------------  -----------------------  ---------  ------------------
//	atomicsem.adaptive.limit      Int64ObservableGauge     {request}  limiter
//	atomicsem.adaptive.in_flight  Int64ObservableGauge     {request}  limiter
//	atomicsem.adaptive.waiting    Int64ObservableGauge     {request}  limiter
//	atomicsem.adaptive.last_rtt   Float64ObservableGauge   s          limiter
//	atomicsem.adaptive.requests   Int64ObservableCounter   {request}  limiter, outcome
//
// limit is the limit in force; in_flight the requests admitted and not yet
// ended (briefly above limit after the limit falls, while the requests
// admitted under the higher one finish); waiting the Acquire calls waiting
// for a slot; last_rtt the round-trip time of the last request that
// succeeded, reported once there is one. requests counts the requests by
// how they ended: outcome is "succeeded", "dropped" or "ignored" for a
// request admitted and ended so, and "rejected" for one that TryAcquire
// found no slot for (shed). The limiter attribute carries the name given
// with WithName; WithAttributes adds more.
package adaptiveotel
