// Package bench holds the benchmark suite that compares atomicsem with the
// other ways to bound concurrency in Go: golang.org/x/sync/semaphore (impl
// xsyncsem), a buffered channel (chan), a mutex with a condition variable
// (mutex) and, for one permit, a bare sync.Mutex (syncmutex).
//
// Beside them run floors: baselines that do the least a design of
// atomicsem's kind must do, so that a gap to a floor is atomicsem's own and a
// target the floor misses too is out of reach for the design. For the fast
// paths: one word taken by compare-and-swap and returned by an atomic add
// (floor) or by compare-and-swap (floorcas), the same behind a call that
// returns a token.Token (tokencas), and that on atomicsem's packed word with
// its checks (wordcas). For hand-off: a mutex-guarded FIFO queue of waiters
// each parked on a channel of its own (floorpark), and that with a guarded
// token and a state word that lets arrivals and releases pass the lock by
// while nobody waits (floorparkword). Their tests hold them to the promises
// they are measured against.
//
// It is a module of its own so that its baselines never become
// dependencies of atomicsem. Every benchmark runs each implementation in the
// same process, under sub-benchmark names of the form
// BenchmarkX/impl=NAME/..., so that
//
//	benchstat -col /impl results.txt
//
// prints one column per implementation. run.sh runs the suite and writes
// the results that docs/benchmarks.md quotes; compare.sh measures one
// revision of the library against another.
package bench
