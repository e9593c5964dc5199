#!/usr/bin/env bash
# placements.sh compares two trees of the library over several code
# placements of each: it builds the benchmark binary of each tree four
# times, with every function of package atomicsem moved by a throwaway
# function of a different size placed first in the package, runs all eight
# binaries round by round, and prints, per benchmark row, the ratio of
# SUBJECT to BASELINE paired within each build and round, pooled per tree,
# with a Mann–Whitney test (cmd/placements). A single build of each tree
# can differ by more than a small change is worth (docs/benchmarks.md,
# Noise).
#
# Usage: bench/placements.sh BEFORE AFTER [benchmark regexp]
#
# BEFORE and AFTER are each a git revision of this repository or a
# directory holding a copy of it (the working tree: .). Neither is changed:
# each is copied to a temporary directory first.
#
# Environment:
#   ROUNDS     rounds (default 10)
#   BENCHTIME  -benchtime of each sample (default 300ms)
#   CPU        -cpu list (default 1,2)
#   IMPLS      implementations run (default atomicsem|chan|floorpark|floorparkword)
#   ROWS       a pattern for the name's level after impl (default: every
#              row), e.g. '^limit=1$' for one row of Contended
#   SUBJECT    the implementation compared (default atomicsem)
#   BASELINE   what it is compared against (default chan)
#   OUT        directory for the binaries and raw results (default bench/out/placements)
set -euo pipefail

if [ $# -lt 2 ]; then
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
fi
# A directory is taken relative to where the script was called from.
BEFORE=$1
AFTER=$2
[ -d "$BEFORE" ] && BEFORE=$(cd "$BEFORE" && pwd)
[ -d "$AFTER" ] && AFTER=$(cd "$AFTER" && pwd)
cd "$(dirname "$0")"
PATTERN=${3:-'^Benchmark(Contended|Weighted)$'}
ROUNDS=${ROUNDS:-10}
BENCHTIME=${BENCHTIME:-300ms}
CPU=${CPU:-1,2}
IMPLS=${IMPLS:-'atomicsem|chan|floorpark|floorparkword'}
ROWS=${ROWS:-}
BENCH="$PATTERN/^impl=($IMPLS)\$"
[ -n "$ROWS" ] && BENCH="$BENCH/$ROWS"
SUBJECT=${SUBJECT:-atomicsem}
BASELINE=${BASELINE:-chan}
OUT=${OUT:-out/placements}
# Pads of 0, 3, 6 and 9 steps move the package's functions by 0, 160, 224
# and 256 bytes with go1.26 on amd64.
PADS=(0 3 6 9)

root=$(git rev-parse --show-toplevel)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# copy_tree puts a copy of the library from revision or directory $1 in $2.
copy_tree() {
	mkdir -p "$2"
	if [ -d "$1" ]; then
		tar -C "$1" --exclude=.git --exclude=bench/out -cf - . | tar -C "$2" -xf -
	else
		git -C "$root" archive "$1" | tar -C "$2" -xf -
	fi
}

# write_pad writes a function of $2 steps, first in package atomicsem of
# tree $1, kept by the linker through an exported variable that init calls.
write_pad() {
	local file=$1/atomicsem/aaa_placement_pad.go
	rm -f "$file"
	[ "$2" -eq 0 ] && return
	{
		echo 'package atomicsem'
		echo
		echo '//go:noinline'
		echo 'func placementPad(x int) int {'
		for i in $(seq "$2"); do
			echo "	x ^= x >> $((i % 7 + 1))"
			echo "	x += $((i * 1237))"
		done
		echo '	return x'
		echo '}'
		echo
		echo 'var PlacementPad = placementPad'
		echo
		echo 'func init() { PlacementPad(len(epoch.String())) }'
	} >"$file"
}

for tree in before after; do
	src=$BEFORE
	[ "$tree" = after ] && src=$AFTER
	copy_tree "$src" "$work/$tree"
	for pad in "${PADS[@]}"; do
		write_pad "$work/$tree" "$pad"
		(cd "$work/$tree/bench" && go test -c -o "$OUT/$tree$pad.test" .)
	done
done

raw="$OUT/raw.txt"
{
	echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(go version)"
	echo "# $(lscpu | grep -m1 'Model name' | sed 's/  */ /g'), $(nproc) CPUs"
	echo "# placements.sh BEFORE=$BEFORE AFTER=$AFTER ROUNDS=$ROUNDS BENCHTIME=$BENCHTIME CPU=$CPU pattern=$BENCH"
} >"$raw"
for round in $(seq "$ROUNDS"); do
	echo "== round $round of $ROUNDS" >&2
	for pad in "${PADS[@]}"; do
		for tree in before after; do
			"$OUT/$tree$pad.test" -test.run '^$' -test.bench "$BENCH" -test.benchmem \
				-test.count 1 -test.benchtime "$BENCHTIME" -test.cpu "$CPU" |
				grep '^Benchmark' |
				sed -E "s#/impl=([^/[:space:]]*[^/[:space:]0-9-])(-[0-9]+)?(/|[[:space:]])#/impl=\1/tree=$tree/place=$pad\2\3#" >>"$raw"
		done
	done
done

go run ./cmd/placements -subject "$SUBJECT" -baseline "$BASELINE" "$raw"
