// Package adaptivebench compares package adaptive with other adaptive
// concurrency limiters for Go: the same simulation
// (adaptive/adaptivetest.Evaluate) run against each, and the per-request
// cost of admitting a request and recording its outcome.
//
// The peers are dependencies of the benchmark module only. Run
//
//	go test -v -run Simulation ./adaptive
//	go test -run '^$' -bench . -benchmem -count 6 ./adaptive
//
// from the bench directory; docs/adaptive.md reports the figures.
package adaptivebench
