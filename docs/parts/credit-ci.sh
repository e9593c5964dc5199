# The credit bucket's stress workload, after the semaphore's. Its package
# tests already run under the root go test (-race, GOARCH=386, and
# -tags atomicsem_hooks); the bench module's credit benchmarks are vetted
# by the existing (cd bench && go vet ./...) step.
step "stress: credit workload"
go run ./stress -credit -duration "$STRESS_DURATION"
