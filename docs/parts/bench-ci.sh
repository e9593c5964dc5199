# The benchmark module (bench/, a module of its own): the steps .ci/run runs
# for it. The first three replace the module's lines in the "go vet",
# "benchmark module tests" and "benchmarks compile and run once" steps; the
# staticcheck line and the run.sh line are new. About 60 s in all on 2 cores.

step "benchmark module: vet and staticcheck"
(cd bench && go vet ./...)
(cd bench && go run "$STATICCHECK" ./...)

step "benchmark module tests (its baselines and harness), -race and without"
(cd bench && go test -race ./...)
# The harness's regime test skips itself under -race (queued_test.go).
(cd bench && go test -count 1 ./...)

step "benchmarks compile and run once"
(cd bench && go test -run '^$' -bench . -benchtime 1x ./... >/dev/null)
# run.sh's groups still match benchmarks and benchstat reads what it writes;
# the results go to the ignored bench/out, not bench/results.
mkdir -p bench/out
COUNT=1 BENCHTIME=1x RESULTS=out/ci bash bench/run.sh >bench/out/ci.log 2>&1 ||
	{ tail -40 bench/out/ci.log; exit 1; }
bash -n bench/compare.sh
