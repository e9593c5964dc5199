module github.com/atomicsem/atomicsem

go 1.26.0

require go.uber.org/atomic v1.12.0
