#!/usr/bin/env bash
# compare.sh measures one revision of the library against another in one
# run: it builds the benchmark binary of each revision, each with that
# revision's own harness, runs the two round by round (in alternating order),
# and prints benchstat of BEFORE against AFTER.
#
# Usage: bench/compare.sh BEFORE AFTER [benchmark regexp]
#
# BEFORE and AFTER are git revisions of this repository, or . for the
# working tree as it is. Neither is changed: each is copied first. The
# default regexp takes the serial, parallel and contended rows and the
# parked waiter's memory of atomicsem in both modes, with chan, floor and
# floorparkword beside them as controls: a control row that moves says how
# much the machine or the harness moved between the two builds.
#
# Environment:
#   COUNT      rounds, one sample of each build per round (default 10)
#   BENCHTIME  -benchtime of each sample (default 500ms)
#   CPU        -cpu list (default: GOMAXPROCS only)
#   SAVE       a name: also keep the raw results as
#              bench/out/compare/SAVE.before.txt and SAVE.after.txt, and
#              benchstat's output as SAVE.benchstat.txt there. A comparison
#              is a step in making a change, not a result of the tree, so
#              it stays out of bench/results (the commit message can quote
#              it).
set -euo pipefail

if [ $# -lt 2 ]; then
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
fi
BEFORE=$1
AFTER=$2
PATTERN=${3:-'^Benchmark(Uncontended|Parallel|Contended|ParkedMemory)$/^impl=(atomicsem|atomicsem-barging|chan|floor|floorparkword)$'}
COUNT=${COUNT:-10}
BENCHTIME=${BENCHTIME:-500ms}
CPU=${CPU:-}
SAVE=${SAVE:-}
BENCHSTAT=(go run golang.org/x/perf/cmd/benchstat@v0.0.0-20250813145418-2f7363a06fe1)

cd "$(dirname "$0")"
root=$(git rev-parse --show-toplevel)
out=$PWD/out/compare
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# build writes the benchmark binary of revision $1 to $out/$2.test.
build() {
	mkdir -p "$work/$2"
	if [ "$1" = . ]; then
		tar -C "$root" --exclude=.git --exclude=bench/out -cf - . | tar -C "$work/$2" -xf -
	else
		git -C "$root" archive "$1" | tar -C "$work/$2" -xf -
	fi
	(cd "$work/$2/bench" && go test -c -o "$out/$2.test" .)
}
build "$BEFORE" before
build "$AFTER" after

describe() {
	if [ "$1" = . ]; then echo "the working tree"; else git -C "$root" log -1 --format='%h %s' "$1" | cut -c1-72; fi
}
{
	echo "# $(lscpu | grep -m1 'Model name' | sed 's/.*: *//') (family $(lscpu | grep -m1 'CPU family' | sed 's/.*: *//') model $(lscpu | grep -m1 '^Model:' | sed 's/.*: *//')), $(nproc) CPUs, $(uname -sr)"
	echo "# $(go version); load average at the start:$(cut -d' ' -f1-3 /proc/loadavg | sed 's/^/ /')"
	echo "# $(date -u +%Y-%m-%d) COUNT=$COUNT BENCHTIME=$BENCHTIME CPU=${CPU:-default} bench/compare.sh $BEFORE $AFTER '$PATTERN'"
	echo "# before: $(describe "$BEFORE")"
	echo "# after:  $(describe "$AFTER")"
} >"$out/header.txt"
cp "$out/header.txt" "$out/before.txt"
cp "$out/header.txt" "$out/after.txt"

sample() {
	"$out/$1.test" -test.run '^$' -test.bench "$PATTERN" -test.benchmem \
		-test.count 1 -test.benchtime "$BENCHTIME" ${CPU:+-test.cpu "$CPU"} |
		grep -v -e '^PASS$' -e '^ok ' >>"$out/$1.txt"
}
for i in $(seq "$COUNT"); do
	echo "== round $i of $COUNT" >&2
	if [ $((i % 2)) -eq 1 ]; then
		sample before
		sample after
	else
		sample after
		sample before
	fi
done

{
	cat "$out/header.txt"
	echo
	"${BENCHSTAT[@]}" before="$out/before.txt" after="$out/after.txt"
} >"$out/benchstat.txt"
cat "$out/benchstat.txt"
if [ -n "$SAVE" ]; then
	cp "$out/before.txt" "$out/$SAVE.before.txt"
	cp "$out/after.txt" "$out/$SAVE.after.txt"
	cp "$out/benchstat.txt" "$out/$SAVE.benchstat.txt"
	echo "compare.sh: wrote bench/out/compare/$SAVE.before.txt, $SAVE.after.txt and $SAVE.benchstat.txt" >&2
fi
