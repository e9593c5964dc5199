#!/usr/bin/env bash
# mutants.sh is the mutation self-check: it shows that the fast test tier
# catches each fault in internal/mutant.
#
# First the clean build must pass the tier, without and with the
# atomicsem_hooks tag. Then, for each fault, the tier runs twice, with
# -tags mutant_<name> and with -tags "mutant_<name> atomicsem_hooks", and must
# fail: a failing test, a panic or a test timeout kills the mutant; a fault
# that passes both runs survived. A build failure is an error, not a kill.
#
# Usage: scripts/mutants.sh [name...]   default: every internal/mutant/mutant_*.go
# Environment: MUTANT_PKGS (the packages), MUTANT_TIMEOUT (go test -timeout,
# default 120s), MUTANT_FLAGS (extra go test flags), MUTANT_QUICK=1 (skip a
# mutant's hooks run once its plain run has killed it).
# Exits non-zero if the clean build fails, a mutant survives, or a run errs.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

pkgs=${MUTANT_PKGS:-./atomicsem/... ./fuzz/... ./token/... ./event/...}
timeout=${MUTANT_TIMEOUT:-120s}
extra=${MUTANT_FLAGS:-}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

if (($# > 0)); then
	names=("$@")
else
	names=()
	for f in internal/mutant/mutant_*.go; do
		[[ $f == *_test.go ]] && continue
		n=${f#internal/mutant/mutant_}
		names+=("${n%.go}")
	done
fi

# tier TAGS LOG: runs the tier; prints "pass", "fail" or "error" and the
# seconds it took.
tier() {
	local tags=$1 log=$2 start end rc
	start=$(date +%s.%N)
	# shellcheck disable=SC2086
	go test -count=1 -timeout "$timeout" $extra -tags "$tags" $pkgs >"$log" 2>&1
	rc=$?
	end=$(date +%s.%N)
	local secs
	secs=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')
	if ((rc == 0)); then
		echo "pass $secs"
	elif grep -q '\[build failed\]\|\[setup failed\]' "$log"; then
		echo "error $secs"
	else
		echo "fail $secs"
	fi
}

# why LOG: the first tests that failed, and the one that hung if the run
# timed out.
why() {
	local log=$1 what hung
	what=$(grep -oE -- '--- FAIL: [^ ]+' "$log" | awk '{print $3}' | awk -F/ '!seen[$1]++' | head -3 | paste -sd, -)
	if grep -q 'panic: test timed out' "$log"; then
		hung=$(awk '/running tests:/ {f = 1; next} f {sub(/^[ \t]+/, ""); sub(/ \(.*$/, ""); print; exit}' "$log")
		what="${what:+$what, }timeout in ${hung:-?}"
	fi
	[[ -z $what ]] && what=$(grep -m1 -E '^panic:' "$log" | cut -c1-60)
	echo "${what:-unknown}"
}

echo "mutants: go test -count=1 -timeout $timeout $extra $pkgs"
clean_ok=1

# The faults sit in small helpers on the fast paths; in a normal build their
# checks are constant-false and compiled out, so those helpers must stay
# inlinable. A fault check written so that it does not fold away shows here.
inl=$(go build -gcflags=-m ./internal/state ./atomicsem ./token 2>&1)
for f in 'Word.WithHeld' 'Word.Forget' 'Word.TryRelease' '(*Semaphore).cas' '(*Semaphore).takeFree' '(*Semaphore).giveBack' '(*Token).Release' '(*Token).Forget'; do
	if ! grep -qF "can inline $f" <<<"$inl"; then
		echo "BROKEN    $f is no longer inlinable in a normal build"
		clean_ok=0
	fi
done
# A caller that imports atomicsem but not token must still get the token's
# Release and Forget inlined: atomicsem's export data carries their bodies
# (releaseToken and forgetToken in atomicsem/semaphore.go).
inl=$(cd bench && go test -c -o /dev/null -gcflags=-m ./caller 2>&1)
for f in 'token.(*Token).Release' 'token.(*Token).Forget'; do
	if ! grep -qF "inlining call to $f" <<<"$inl"; then
		echo "BROKEN    $f is no longer inlined into bench/caller, which imports only atomicsem"
		clean_ok=0
	fi
done
for tags in "" "atomicsem_hooks"; do
	read -r verdict secs < <(tier "$tags" "$logs/clean.log")
	printf '%-9s %-26s tags=%-16s %6ss\n' "$( [[ $verdict == pass ]] && echo CLEAN || echo BROKEN )" "(none)" "${tags:-(none)}" "$secs"
	if [[ $verdict != pass ]]; then
		clean_ok=0
		grep -E -- '--- FAIL|^FAIL|panic:|build failed' "$logs/clean.log" | head -10 | sed 's/^/          /'
	fi
done
if ((clean_ok == 0)); then
	echo "mutants: the clean build fails the tier; mutation results would mean nothing"
	exit 1
fi

killed=0 survived=0 errors=0
for name in "${names[@]}"; do
	detail=() dead=0 bad=0 total=0
	for tags in "mutant_$name" "mutant_$name atomicsem_hooks"; do
		if ((dead)) && [[ ${MUTANT_QUICK:-} == 1 ]]; then
			break
		fi
		log=$logs/$name.${tags// /_}.log
		read -r verdict secs < <(tier "$tags" "$log")
		total=$(awk -v a="$total" -v b="$secs" 'BEGIN {printf "%.1f", a + b}')
		label=plain
		[[ $tags == *atomicsem_hooks ]] && label=hooks
		case $verdict in
		fail) dead=1; detail+=("$label: killed ${secs}s by $(why "$log")") ;;
		pass) detail+=("$label: passed ${secs}s") ;;
		error) bad=1; detail+=("$label: build error") ;;
		esac
	done
	if ((bad)); then
		verdict=ERROR; errors=$((errors + 1))
	elif ((dead)); then
		verdict=KILLED; killed=$((killed + 1))
	else
		verdict=SURVIVED; survived=$((survived + 1))
	fi
	printf '%-9s %-26s %6ss  %s\n' "$verdict" "$name" "$total" "$(IFS=';'; echo "${detail[*]}" | sed 's/;/; /g')"
	if ((bad)); then
		grep -h -A5 'build failed\|setup failed' "$logs/$name".*.log | head -10 | sed 's/^/          /'
	fi
done

summary="mutants: $killed killed, $survived survived"
((errors > 0)) && summary+=", $errors errors"
echo "$summary"
((survived == 0 && errors == 0))
