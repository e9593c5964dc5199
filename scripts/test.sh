#!/usr/bin/env bash
# test.sh runs the tests of every module in the repository, with the race
# detector: the core, then each nested module (every directory with a
# go.mod of its own). It is the README's test command, and CI runs it.
#
# The tests start the servers they need: etcdsem's start etcd inside the
# test process, and rediscredit's (and the benchmark module's Redis
# benchmark) start redis-server on a loopback port. Without redis-server
# on $PATH (Debian's redis-server package; or $REDIS_SERVER naming the
# binary) those tests skip, saying so, unless CI=true, under which they
# fail instead.
#
# It prints a line before each module and the time each took, and a line
# for each package as soon as it finishes (go test -json, read by the awk
# program below: go test's own output waits for the packages before it),
# with the whole output of a package that fails. Extra arguments go to
# every go test (scripts/test.sh -count=1 -short).
#
# Usage: scripts/test.sh [go test flags]
set -euo pipefail
cd "$(dirname "$0")/.."

modules=(.)
for f in */go.mod; do
	[[ -f $f ]] && modules+=("${f%/go.mod}")
done

if ! command -v "${REDIS_SERVER:-redis-server}" >/dev/null 2>&1; then
	if [[ ${CI:-} == true ]]; then
		echo "test.sh: CI=true and no redis-server: the Redis tests will fail" >&2
	else
		echo "test.sh: no redis-server on \$PATH: the Redis tests skip (install Debian's redis-server, or set REDIS_SERVER)" >&2
	fi
fi

# progress prints go test -json's events as they come: a line per package
# that finishes, and the output of one that fails or does not build.
progress() {
	awk '
	function field(name,   re, v) {
		re = "\"" name "\":\"([^\"\\\\]|\\\\.)*\""
		if (!match($0, re)) return ""
		v = substr($0, RSTART + length(name) + 4, RLENGTH - length(name) - 5)
		gsub(/\\n/, "\n", v); gsub(/\\t/, "\t", v); gsub(/\\"/, "\"", v); gsub(/\\\\/, "\\", v)
		return v
	}
	!/^{/ { print; next }
	{
		action = field("Action"); pkg = field("Package")
		if (pkg == "") pkg = field("ImportPath")
		if (action == "output" || action == "build-output") { out[pkg] = out[pkg] field("Output"); next }
		if (field("Test") != "") next
		if (action == "pass" || action == "skip") {
			elapsed = ""
			if (match($0, /"Elapsed":[0-9.e+-]+/)) elapsed = sprintf("%.1fs", substr($0, RSTART + 10, RLENGTH - 10) + 0)
			printf "%-4s %s %s\n", (action == "pass" ? "ok" : "skip"), pkg, elapsed
			delete out[pkg]
		} else if (action == "fail" || action == "build-fail") {
			printf "%s", out[pkg]
			printf "FAIL %s\n", pkg
			delete out[pkg]
		}
		fflush()
	}'
}

start=$SECONDS
failed=()
for i in "${!modules[@]}"; do
	m=${modules[$i]}
	name=$m
	[[ $m == . ]] && name="the core module"
	printf '=== %s (%d of %d): go test -race ./... %s\n' "$name" $((i + 1)) ${#modules[@]} "$*"
	t0=$SECONDS
	if ! (cd "$m" && go test -race -json "$@" ./... | progress); then
		failed+=("$m")
	fi
	printf -- '--- %s: %d s\n' "$name" $((SECONDS - t0))
done
if ((${#failed[@]} > 0)); then
	echo "test.sh: FAIL in ${failed[*]} ($((SECONDS - start)) s)"
	exit 1
fi
echo "test.sh: every module passed ($((SECONDS - start)) s)"
