#!/usr/bin/env bash
# run.sh runs the adaptive limiters' overhead benchmark in interleaved rounds
# and writes the raw lines to results/adaptive.txt and benchstat's table,
# one column per implementation, to results/adaptive.benchstat.txt.
#
# Usage: bench/adaptive/run.sh   Environment: COUNT (rounds, default 10),
# BENCHTIME (per round, default 200ms).
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${COUNT:-10}
BENCHTIME=${BENCHTIME:-200ms}
BENCHSTAT=(go run golang.org/x/perf/cmd/benchstat@v0.0.0-20250813145418-2f7363a06fe1)

mkdir -p out results
raw=results/adaptive.txt
{
	echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(go version)"
	echo "# $(lscpu | grep -m1 'Model name' | sed 's/  */ /g'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "# adaptive/run.sh COUNT=$COUNT BENCHTIME=$BENCHTIME"
} >"$raw"
go test -c -o out/adaptive.test ./adaptive
for i in $(seq "$COUNT"); do
	echo "== round $i of $COUNT" >&2
	out/adaptive.test -test.run '^$' -test.bench AcquireRecord -test.benchmem \
		-test.count 1 -test.benchtime "$BENCHTIME" | tee -a "$raw" >&2
done
"${BENCHSTAT[@]}" -col "/impl@(failsafe adaptive-aimd adaptive-vegas adaptive-gradient2 failsafe-100ms)" "$raw" | tee results/adaptive.benchstat.txt
