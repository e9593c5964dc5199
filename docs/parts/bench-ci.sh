# The benchmark module (bench/, a module of its own). .ci/run already vets,
# staticchecks and tests it and runs every benchmark once; these lines go at
# the end of its "benchmarks compile and run once" step. They run bench/run.sh
# for one round of one iteration, so that a group whose benchmarks were
# renamed, or a benchstat table that no longer reads its input, fails CI
# rather than the next benchmark report (about 15 s on 2 cores; the results
# go to the ignored bench/out, not bench/results), and check compare.sh's
# syntax (it builds two revisions, too slow for CI).
mkdir -p bench/out
COUNT=1 BENCHTIME=1x RESULTS=out/ci bash bench/run.sh >bench/out/ci.log 2>&1 ||
	{ tail -40 bench/out/ci.log; exit 1; }
bash -n bench/compare.sh
