module github.com/atomicsem/atomicsem/bench

go 1.26.0

replace github.com/atomicsem/atomicsem => ../

replace github.com/atomicsem/atomicsem/rediscredit => ../rediscredit

require (
	github.com/atomicsem/atomicsem v0.1.0
	github.com/atomicsem/atomicsem/rediscredit v0.1.0
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/go-chi/httprate v0.16.1
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/hashicorp/golang-lru/v2 v2.0.7
	github.com/juju/ratelimit v1.0.2
	github.com/platinummonkey/go-concurrency-limits v1.0.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/sethvargo/go-limiter v0.7.1
	github.com/sourcegraph/conc v0.3.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	go.uber.org/ratelimit v0.3.1
	golang.org/x/image v0.48.0
	golang.org/x/sync v0.19.0
	golang.org/x/time v0.15.0
)

require (
	github.com/benbjohnson/clock v1.3.0 // indirect
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/multierr v1.9.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
