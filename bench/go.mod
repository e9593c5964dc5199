module github.com/atomicsem/atomicsem/bench

go 1.25

replace github.com/atomicsem/atomicsem => ../

require (
	github.com/atomicsem/atomicsem v0.0.0-00010101000000-000000000000
	github.com/sourcegraph/conc v0.3.0
	golang.org/x/sync v0.19.0
)

require (
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/multierr v1.9.0 // indirect
)
