// Package rediscreditbench compares the Redis credit backend
// (github.com/atomicsem/atomicsem/rediscredit) with go-redis/redis_rate,
// both through go-redis to one redis-server on loopback that the test
// binary starts, with a PING per call as the floor.
//
// redis_rate is a dependency of the benchmark module only, never of
// rediscredit's. Run
//
//	go test -run '^$' -bench TrySpend -benchmem ./rediscredit
//
// from the bench directory (redis-server on $PATH, or $REDIS_SERVER naming
// it); bench/run.sh rediscredit runs it in rounds and docs/benchmarks.md
// reports the figures.
package rediscreditbench
