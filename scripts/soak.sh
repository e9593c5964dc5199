#!/usr/bin/env bash
# soak.sh runs one package's tests many times over with every core kept
# busy by spinning processes, as a loaded CI machine does, and stops at the
# first run that fails or hangs; it prints that run's output.
#
# Usage: scripts/soak.sh DIR [RUNS [PATTERN]]
#   DIR      the package's directory (a nested module's is tested from
#            inside it), e.g. etcdsem
#   RUNS     how many runs (default 20)
#   PATTERN  go test -run's pattern (default: every test)
# Environment: SOAK_TIMEOUT (each run's go test -timeout, default 120s),
# SOAK_FLAGS (go test's build flags, e.g. -race).
set -uo pipefail

dir=${1:?usage: scripts/soak.sh DIR [RUNS [PATTERN]]}
runs=${2:-20}
pattern=${3:-.}
cd "$(dirname "$0")/../$dir"
bin=$(mktemp)
trap 'rm -f "$bin" "$bin.log"; kill $(jobs -p) 2>/dev/null' EXIT
# shellcheck disable=SC2086
go test -c ${SOAK_FLAGS:-} -o "$bin" . || exit 1

for ((c = 0; c < $(nproc); c++)); do
	(while :; do :; done) &
done
for ((i = 1; i <= runs; i++)); do
	start=$(date +%s)
	"$bin" -test.count=1 -test.run "$pattern" -test.timeout "${SOAK_TIMEOUT:-120s}" >"$bin.log" 2>&1
	rc=$?
	echo "soak: run $i of $runs: exit $rc in $(($(date +%s) - start)) s"
	if ((rc != 0)); then
		cat "$bin.log"
		exit 1
	fi
done
echo "soak: $runs runs passed"
