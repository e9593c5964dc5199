module github.com/atomicsem/atomicsem/bench

go 1.25.0

replace github.com/atomicsem/atomicsem => ../

require (
	github.com/atomicsem/atomicsem v0.0.0-00010101000000-000000000000
	github.com/juju/ratelimit v1.0.2
	go.uber.org/ratelimit v0.3.1
	golang.org/x/sync v0.19.0
	golang.org/x/time v0.15.0
)

require (
	github.com/benbjohnson/clock v1.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	gopkg.in/check.v1 v1.0.0-20201130134442-10cb98267c6c // indirect
)
