module github.com/atomicsem/atomicsem/rediscredit

go 1.26.0

replace github.com/atomicsem/atomicsem => ../

require (
	github.com/atomicsem/atomicsem v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
