#!/usr/bin/env bash
# handoff.sh measures what the contended hand-off (BenchmarkContended at a
# limit of 1: 64 goroutines per P, started parked) costs in a production
# binary and in a test binary, at two revisions, in one run: for each
# revision it builds the command in handoff/ (taken from the working tree,
# so that both revisions run the same harness) and the benchmark test
# binary, runs the four round by round in rotating order, each sample
# beside x/sync's semaphore and a buffered channel, and prints benchstat of
# the four against each other and of each against its own baselines, in
# CPU time per operation (cpu-ns/op, which other work on a shared machine
# does not inflate; the raw files have ns/op too).
#
# Usage: bench/handoff.sh BEFORE AFTER
#
# BEFORE and AFTER are git revisions of this repository, or . for the
# working tree as it is.
#
# Environment:
#   COUNT      rounds, one sample of each binary per round (default 8)
#   BENCHTIME  -benchtime of each sample (default 500ms)
#   SAVE       a name: also write the raw results and benchstat's output to
#              bench/results/SAVE.*.txt
set -euo pipefail

if [ $# -lt 2 ]; then
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
fi
BEFORE=$1
AFTER=$2
COUNT=${COUNT:-8}
BENCHTIME=${BENCHTIME:-500ms}
SAVE=${SAVE:-}
BENCHSTAT=(go run golang.org/x/perf/cmd/benchstat@v0.0.0-20250813145418-2f7363a06fe1)
PATTERN='^BenchmarkContended$/^impl=(atomicsem|xsyncsem|chan)$/^limit=1$'

cd "$(dirname "$0")"
root=$(git rev-parse --show-toplevel)
out=$PWD/out/handoff
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# build writes the production binary of revision $1 to $out/$2-prod and its
# test binary to $out/$2-test.
build() {
	mkdir -p "$work/$2"
	if [ "$1" = . ]; then
		tar -C "$root" --exclude=.git --exclude=bench/out -cf - . | tar -C "$work/$2" -xf -
	else
		git -C "$root" archive "$1" | tar -C "$work/$2" -xf -
	fi
	rm -rf "$work/$2/bench/handoff"
	cp -r "$root/bench/handoff" "$work/$2/bench/handoff"
	(cd "$work/$2/bench" && go build -o "$out/$2-prod" ./handoff && go test -c -o "$out/$2-test" .)
}
build "$BEFORE" before
build "$AFTER" after

describe() {
	if [ "$1" = . ]; then echo "the working tree"; else git -C "$root" log -1 --format='%h %s' "$1" | cut -c1-72; fi
}
{
	echo "# $(lscpu | grep -m1 'Model name' | sed 's/.*: *//'), $(nproc) CPUs, $(uname -sr)"
	echo "# $(go version); load average at the start:$(cut -d' ' -f1-3 /proc/loadavg | sed 's/^/ /')"
	echo "# $(date -u +%Y-%m-%d) COUNT=$COUNT BENCHTIME=$BENCHTIME bench/handoff.sh $BEFORE $AFTER"
	echo "# before: $(describe "$BEFORE")"
	echo "# after:  $(describe "$AFTER")"
} >"$out/header.txt"
binaries=(before-prod before-test after-prod after-test)
for b in "${binaries[@]}"; do cp "$out/header.txt" "$out/$b.txt"; done

sample() {
	case $1 in
	*-prod) "$out/$1" -count 1 -benchtime "$BENCHTIME" ;;
	*-test) "$out/$1" -test.run '^$' -test.bench "$PATTERN" -test.benchmem \
		-test.count 1 -test.benchtime "$BENCHTIME" | grep -v -e '^PASS$' -e '^ok ' -e '^cpu: ' ;;
	esac >>"$out/$1.txt"
}
for i in $(seq "$COUNT"); do
	echo "== round $i of $COUNT" >&2
	for j in 0 1 2 3; do
		sample "${binaries[$(((i + j) % 4))]}"
	done
done

{
	cat "$out/header.txt"
	echo
	echo "### Each binary against the production binary of BEFORE (CPU time per operation)"
	"${BENCHSTAT[@]}" -filter '.unit:cpu-ns/op' \
		before-prod="$out/before-prod.txt" after-prod="$out/after-prod.txt" \
		before-test="$out/before-test.txt" after-test="$out/after-test.txt"
	for b in "${binaries[@]}"; do
		echo
		echo "### $b: atomicsem against x/sync and a buffered channel (CPU time per operation)"
		"${BENCHSTAT[@]}" -filter '.unit:cpu-ns/op' -col '/impl@(atomicsem xsyncsem chan)' "$out/$b.txt"
	done
} >"$out/benchstat.txt"
cat "$out/benchstat.txt"
if [ -n "$SAVE" ]; then
	mkdir -p results
	for b in "${binaries[@]}"; do cp "$out/$b.txt" "results/$SAVE.$b.txt"; done
	cp "$out/benchstat.txt" "results/$SAVE.benchstat.txt"
	echo "handoff.sh: wrote bench/results/$SAVE.*.txt" >&2
fi
