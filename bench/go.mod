module github.com/atomicsem/atomicsem/bench

go 1.25

replace github.com/atomicsem/atomicsem => ../

require (
	github.com/atomicsem/atomicsem v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sync v0.19.0
)

require (
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
