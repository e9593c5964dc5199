// Package bench holds the benchmark suite that compares atomicsem with
// other ways to bound concurrency: golang.org/x/sync/semaphore, a buffered
// channel, a mutex with a condition variable, a bare sync.Mutex, a bare
// one-word counter taken by compare-and-swap and returned by an atomic add
// (the floor any one-word design can reach) or by compare-and-swap too (the
// floor of a word changed only by compare-and-swap), and mutex-guarded FIFO queues of waiters each parked on a channel
// of its own: bare, with the token's guard, and with that and a state word
// that lets arrivals pass the lock by while nobody waits (the floors of
// hand-off to such waiters).
//
// It is a module of its own so that its baselines never become
// dependencies of atomicsem. Every benchmark runs each implementation in the
// same process, under sub-benchmark names of the form
// BenchmarkX/impl=NAME/..., so that
//
//	benchstat -col /impl results.txt
//
// prints one column per implementation. run.sh runs the suite and prints
// the tables; docs/benchmarks.md reports the figures and what they mean.
//
// The subpackage caller benchmarks atomicsem alone from a package that does
// not import package token, as most callers do not: the suite's harness
// imports it, and what a caller imports decides whether the compiler can
// inline the token's Release there.
package bench
