// Package leasesim simulates a fleet of processes that spend one key's
// credit through rediscredit's Lease: the library's own Lease code, each
// process with a Limiter of its own, against a model of the Redis script
// (checked against a real redis-server where one is installed), on the
// fake clock of a testing/synctest bubble. It measures what a fleet of a
// thousand processes costs the backend, and how fairly the credit is
// shared, beside Doorman's published figures; see docs/fleet.md.
//
//	go test -run Simulation -v ./leasesim            # the short run
//	go test -run Simulation -v ./leasesim -leasesim.long
//
// from the bench directory; bench/run.sh lease writes the long run to
// bench/results/lease-sim.txt.
package leasesim
