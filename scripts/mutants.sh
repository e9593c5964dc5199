#!/usr/bin/env bash
# mutants.sh is the mutation self-check: it shows that the fast test tier
# catches each deliberate fault in scripts/mutants/*.patch.
#
# Each patch file starts with a one-line description of its fault,
# optionally a line "Packages: <go test packages>" naming the tier for this
# fault (the default tier otherwise), and then a diff against the tree.
# The script copies the tree (tracked and untracked files that git does not
# ignore) to a temporary directory, checks that the tier passes there, and
# then, for each patch: applies it, runs the tier, which must fail, and
# takes the patch out again. The tier is the tests and the fuzz targets'
# seed corpora, not the examples: go test runs those even after -failfast
# has stopped the tests, and on a broken build one may wait for ever. It
# runs without build tags first and, if that did not fail, with
# -tags atomicsem_hooks. A failing test, a panic or a test timeout kills the
# mutant; a fault that passes both runs survived. A patch that no longer
# applies, or a mutant that does not build, is an error: the set must be
# kept current as the code changes.
#
# Usage: scripts/mutants.sh [name...]   default: every scripts/mutants/*.patch
# Environment: MUTANT_PKGS (the packages), MUTANT_TIMEOUT (go test -timeout
# of a mutant's run, in seconds with an "s", default 120s; a tier whose
# clean run takes more than a third of it gets three times that, so that a
# slower machine does not pass a slow tier off as a hung mutant),
# MUTANT_FLAGS (extra go test flags), MUTANT_JOBS (patches tried at once, each in a copy of its own; default 2, since most of a run
# is spent waiting on timers, servers and the linker).
# Exits non-zero if the clean tree fails, a mutant survives, or a run errs.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

pkgs=${MUTANT_PKGS:-./atomicsem/... ./fuzz/... ./token/... ./event/...}
timeout=${MUTANT_TIMEOUT:-120s}
extra=${MUTANT_FLAGS:-}
jobs=${MUTANT_JOBS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if (($# > 0)); then
	names=("$@")
else
	names=()
	for f in scripts/mutants/*.patch; do
		n=${f#scripts/mutants/}
		names+=("${n%.patch}")
	done
fi

# Each worker's copy lives at one path for the whole run, so that the
# build cache serves every package a patch does not touch.
for ((w = 0; w < jobs; w++)); do
	mkdir -p "$work/tree.$w"
	git ls-files -z --cached --others --exclude-standard | tar -C "$root" --null -T - -cf - | tar -C "$work/tree.$w" -xf -
done
tree=$work/tree.0

# tier TAGS LOG [PKGS [TIMEOUT]]: runs the tier (on PKGS, or the default
# packages) in the copy, with go test's -timeout TIMEOUT (default
# $timeout); prints "pass", "fail" or "error" and the seconds it took.
tier() {
	local tags=$1 log=$2 run=${3:-$pkgs} tmo=${4:-$timeout} start end rc secs dir=$tree mod
	# Packages of a nested module (a directory with a go.mod of its own,
	# such as ./etcdsem/...) are tested from inside it.
	mod=${run#./}
	mod=${mod%%/*}
	if [[ $run == ./*/* && -f $tree/$mod/go.mod ]]; then
		dir=$tree/$mod
		run=${run//.\/$mod\//.\/}
	fi
	start=$(date +%s.%N)
	# shellcheck disable=SC2086
	(cd "$dir" && go test -count=1 -failfast -run '^(Test|Fuzz)' -timeout "$tmo" $extra -tags "$tags" $run) >"$log" 2>&1
	rc=$?
	end=$(date +%s.%N)
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
	# The first three tests that failed, each by its top-level name or, for a
	# subtest, its top-level and its own name (a suite's check).
	what=$(grep -oE -- '--- FAIL: [^ ]+' "$log" | awk '{print $3}' |
		awk -F/ '{n = NF > 1 ? $1 "/…/" $NF : $1} !seen[$1]++ {print n}' | head -3 | paste -sd, -)
	if grep -q 'panic: test timed out' "$log"; then
		hung=$(awk '/running tests:/ {f = 1; next} f {sub(/^[ \t]+/, ""); sub(/ \(.*$/, ""); print; exit}' "$log")
		what="${what:+$what, }timeout in ${hung:-?}"
	fi
	[[ -z $what ]] && what=$(grep -m1 -E '^(panic|fatal error):' "$log" | cut -c1-60)
	echo "${what:-unknown}"
}

# The clean tree must pass every tier a patch names, as well as the default:
# the main module's packages in one run, each nested module's in its own.
cleantiers=("$pkgs")
for name in "${names[@]}"; do
	own=$(sed -n '1,3s/^Packages: //p' "scripts/mutants/$name.patch" | head -1)
	[[ -z $own ]] && continue
	mod=${own#./}
	mod=${mod%%/*}
	if [[ -f $tree/$mod/go.mod ]]; then
		[[ " ${cleantiers[*]} " != *" $own "* ]] && cleantiers+=("$own")
	elif [[ " ${cleantiers[0]} " != *" $own "* ]]; then
		cleantiers[0]+=" $own"
	fi
done

echo "mutants: go test -count=1 -failfast -run '^(Test|Fuzz)' -timeout $timeout $extra $pkgs (or the packages a patch names)"
# tiertimeout[TIER] is the -timeout of a mutant's run of TIER: $timeout, or
# three times the tier's longest clean run where that is more. The clean
# runs themselves get ten minutes, go test's default.
declare -A tiertimeout
floor=${timeout%s}
[[ $floor =~ ^[0-9]+$ ]] || floor=0 # not in seconds: $timeout as given
for tags in "" "atomicsem_hooks"; do
	for t in "${cleantiers[@]}"; do
		# The hooks live in atomicsem, which no nested module imports.
		[[ -n $tags && $t != "${cleantiers[0]}" ]] && continue
		read -r verdict secs < <(tier "$tags" "$work/clean.log" "$t" 10m)
		printf '%-9s %-26s tags=%-16s %6ss  %s\n' "$([[ $verdict == pass ]] && echo CLEAN || echo BROKEN)" "(none)" "${tags:-(none)}" "$secs" "$t"
		if [[ $verdict != pass ]]; then
			grep -E -- '--- FAIL|^FAIL|panic:|build failed' "$work/clean.log" | head -10 | sed 's/^/          /'
			grep -A3 'running tests:' "$work/clean.log" | sed 's/^/          /'
			echo "mutants: the clean tree fails the tier; mutation results would mean nothing"
			exit 1
		fi
		t3=$(awk -v s="$secs" 'BEGIN {print int(3 * s + 1)}')
		if ((floor > 0 && t3 > floor && t3 > ${tiertimeout[$t]:-0})); then
			tiertimeout[$t]=$t3
			echo "          a mutant's run of this tier gets -timeout ${t3}s"
		fi
	done
done

# mutant NAME: applies the patch in $tree, runs its tier (the hook build
# only if the plain one missed it), takes the patch out again, and prints
# one line: the verdict, the name, the seconds and what killed it.
mutant() {
	local name=$1 patch=$root/scripts/mutants/$1.patch own detail dead bad total tags log verdict secs label tiername tmo
	if ! (cd "$tree" && git apply --check "$patch") 2>"$work/$name.apply.log"; then
		printf '%-9s %-26s %s\n' STALE "$name" "no longer applies: $(head -1 "$work/$name.apply.log")"
		return
	fi
	(cd "$tree" && git apply "$patch")
	own=$(sed -n '1,3s/^Packages: //p' "$patch" | head -1)
	# A patch's packages in the main module ran clean in the default tier;
	# a nested module's, in their own.
	tiername=${cleantiers[0]}
	[[ -n $own && " ${cleantiers[*]:1} " == *" $own "* ]] && tiername=$own
	tmo=$timeout
	[[ -n ${tiertimeout[$tiername]:-} ]] && tmo=${tiertimeout[$tiername]}s
	detail=() dead=0 bad=0 total=0
	for tags in "" "atomicsem_hooks"; do
		((dead)) && break
		log=$work/$name.${tags:-plain}.log
		read -r verdict secs < <(tier "$tags" "$log" "$own" "$tmo")
		total=$(awk -v a="$total" -v b="$secs" 'BEGIN {printf "%.1f", a + b}')
		label=plain
		[[ -n $tags ]] && label=hooks
		case $verdict in
		fail) dead=1 && detail+=("$label: killed ${secs}s by $(why "$log")") ;;
		pass) detail+=("$label: passed ${secs}s") ;;
		error) bad=1 && detail+=("$label: build error") && break ;;
		esac
	done
	(cd "$tree" && git apply -R "$patch")
	if ((bad)); then
		verdict=ERROR
	elif ((dead)); then
		verdict=KILLED
	else
		verdict=SURVIVED
	fi
	printf '%-9s %-26s %6ss  %s\n' "$verdict" "$name" "$total" "$(IFS=';'; echo "${detail[*]}" | sed 's/;/; /g')"
	if ((bad)); then
		grep -h -A5 'build failed\|setup failed' "$work/$name".*.log | head -10 | sed 's/^/          /'
	fi
}

# The workers take the patches in turn, each in its own copy; a worker's
# lines are printed as it finishes each patch.
for ((w = 0; w < jobs; w++)); do
	(
		tree=$work/tree.$w
		for ((i = w; i < ${#names[@]}; i += jobs)); do
			mutant "${names[i]}" >"$work/result.$i"
			cat "$work/result.$i"
		done
	) &
done
wait

results=$(cat "$work"/result.* 2>/dev/null)
killed=$(grep -c '^KILLED' <<<"$results" || true)
survived=$(grep -c '^SURVIVED' <<<"$results" || true)
errors=$(grep -c -E '^(STALE|ERROR)' <<<"$results" || true)
# A worker that died early leaves patches without a verdict.
missing=$((${#names[@]} - killed - survived - errors))
((missing > 0)) && errors=$((errors + missing))
summary="mutants: $killed killed, $survived survived"
((errors > 0)) && summary+=", $errors errors"
echo "$summary"
((survived == 0 && errors == 0))
