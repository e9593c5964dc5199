#!/usr/bin/env bash
# recovery.sh measures etcdsem's recovery bound: how long a crashed holder
# keeps its permits, counted from the crash and, after a server restart,
# from the server being ready; and how long the in-process etcd server
# takes to stop with its clients connected and with them cut off. It runs
# etcdsem's TestRecoveryTimes (ETCDSEM_RECOVERY trials of each) twice:
# on the machine as it is ("quiet"), then with every core kept busy by
# spinning processes, as a loaded CI machine is ("loaded"), and writes one
# line per trial and a summary per kind to $RESULTS/etcdsem-recovery.txt,
# with the machine, the Go version, the load average and the command at the
# top. docs/fleet.md quotes the summaries.
#
# Usage: bench/recovery.sh
# Environment:
#   TRIALS   trials of each kind, each run (default 30)
#   TTL      the holders' lease, in seconds (default 2)
#   LOADS    which runs, of "quiet loaded" (default both)
#   RESULTS  directory for the results (default bench/results; relative
#            paths are taken from bench/)
#
# As bench/run.sh does, it refuses to write to bench/results from a tree
# with uncommitted changes: the results name the commit that made them.
# With the defaults it takes about 15 minutes.
set -euo pipefail

cd "$(dirname "$0")"
TRIALS=${TRIALS:-30}
TTL=${TTL:-2}
LOADS=${LOADS:-quiet loaded}
RESULTS=${RESULTS:-results}

REV=$(git describe --always --dirty 2>/dev/null || echo unknown)
if [[ $RESULTS == results && ( $REV == *-dirty || $REV == unknown ) ]]; then
	echo "recovery.sh: the tree has uncommitted changes ($REV): commit first, or set RESULTS=out/..." >&2
	exit 1
fi
mkdir -p "$RESULTS"
out=$RESULTS/etcdsem-recovery.txt

bin=$(mktemp)
spinners=()
failed=0
cleanup() {
	rm -f "$bin" "$bin.log"
	for pid in "${spinners[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
}
trap cleanup EXIT
(cd ../etcdsem && go test -c -o "$bin" .)

{
	echo "# $(lscpu | grep -m1 'Model name' | sed 's/.*: *//'), $(nproc) CPUs, $(uname -sr)"
	echo "# $(go version)"
	echo "# $(date -u +%Y-%m-%d) TRIALS=$TRIALS TTL=$TTL bench/recovery.sh, at $REV"
} >"$out"

for load in $LOADS; do
	if [[ $load == loaded ]]; then
		for ((c = 0; c < $(nproc); c++)); do
			(while :; do :; done) &
			spinners+=($!)
		done
	fi
	echo "# load=$load: load average at the start $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out"
	rc=0
	ETCDSEM_RECOVERY=$TRIALS ETCDSEM_RECOVERY_TTL=$TTL "$bin" -test.run '^TestRecoveryTimes$' -test.v -test.count=1 -test.timeout 60m >"$bin.log" 2>&1 || rc=$?
	grep -E '(recovery|summary) kind=' "$bin.log" | sed -E "s/^ *recovery_test.go:[0-9]+: /load=$load /" >>"$out" || true
	if ((rc != 0)); then
		echo "# load=$load: the run failed (exit $rc)" >>"$out"
		grep -E -- '--- FAIL|Error:|Messages:' "$bin.log" >&2 || tail -20 "$bin.log" >&2
		failed=1
	fi
	for pid in "${spinners[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	spinners=()
done
grep -E '^load=.* summary|failed' "$out"
exit "$failed"
