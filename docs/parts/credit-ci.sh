# The credit bucket's stress workload, beside the two semaphore modes in the
# "stress runner" step (about STRESS_DURATION more). The package's tests
# already run under the root go test (-race, GOARCH=386, -tags
# atomicsem_hooks); the credit benchmarks already run in the bench module's
# vet, staticcheck and "benchmarks compile and run once" steps; the credit
# mutants run with every scripts/mutants/*.patch.
go run ./stress -duration "$STRESS_DURATION" -credit
