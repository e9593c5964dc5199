# etcdsem: the nested module (its own go.mod), vetted, and tested against
# etcd servers that the tests start in-process (loopback, random ports, a
# fresh data directory each), so nothing needs installing. gofmt is covered
# by the root step. Run from the repository root, after the root checks.

step "etcdsem: vet and staticcheck"
(cd etcdsem && go vet ./... && go run "$STATICCHECK" ./...)

step "etcdsem: tests, with the fleet load at the issue's full size (8 clients x 1000 cycles)"
(cd etcdsem && ETCDSEM_CYCLES=1000 go test -count=1 ./...)

step "etcdsem: tests, -race"
(cd etcdsem && go test -race -count=1 ./...)
