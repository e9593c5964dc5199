#!/usr/bin/env bash
# run.sh runs the benchmark suite and prints benchstat tables, one column per
# implementation, and the table of performance targets.
#
# Usage: bench/run.sh [benchmark regexp]
#
# Environment:
#   COUNT      samples per benchmark (default 10)
#   BENCHTIME  -benchtime of each sample (default 1s)
#   OUT        directory for the raw results (default bench/out)
#   CPU        -cpu list, e.g. 1,2,4,8,16 (default: GOMAXPROCS only)
#
# The test binary is built once and run COUNT times with -count 1, so that
# the samples of every implementation are spread over the same stretch of
# time: on a shared machine a burst of other work then moves all columns
# alike instead of skewing the one that happened to run during it. This is
# the same number of samples as -count COUNT, only interleaved.
set -euo pipefail

cd "$(dirname "$0")"
COUNT=${COUNT:-10}
BENCHTIME=${BENCHTIME:-1s}
OUT=${OUT:-out}
PATTERN=${1:-.}
BENCHSTAT=(go run golang.org/x/perf/cmd/benchstat@v0.0.0-20250813145418-2f7363a06fe1)

mkdir -p "$OUT"
raw="$OUT/raw.txt"
{
	echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(go version)"
	echo "# $(lscpu | grep -m1 'Model name' | sed 's/  */ /g'), $(nproc) CPUs"
	echo "# run.sh COUNT=$COUNT BENCHTIME=$BENCHTIME pattern=$PATTERN"
} >"$raw"

go test -c -o "$OUT/bench.test" .
for i in $(seq "$COUNT"); do
	echo "== round $i of $COUNT" >&2
	"$OUT/bench.test" -test.run '^$' -test.bench "$PATTERN" -test.benchmem \
		-test.count 1 -test.benchtime "$BENCHTIME" ${CPU:+-test.cpu "$CPU"} | tee -a "$raw" >&2
done

echo
echo "### every benchmark, one column per implementation (base: the first)"
"${BENCHSTAT[@]}" -col /impl "$raw"
echo
echo "### fast paths against the floor"
"${BENCHSTAT[@]}" -filter '.name:/^(Uncontended|Direct|Parallel)$/' \
	-col '/impl@(floor floorcas atomicsem atomicsem-barging xsync chan mutex)' "$raw" || true
echo
echo "### queue length: one column per parked count"
"${BENCHSTAT[@]}" -filter '.name:QueueLen' -col /parked "$raw" || true
echo
echo "### targets (ratios of medians from this run)"
go run ./cmd/targets "$raw"
