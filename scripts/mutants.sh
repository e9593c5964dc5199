#!/usr/bin/env bash
# mutants.sh is the mutation self-check: it shows that the fast test tier
# catches each deliberate fault in scripts/mutants/*.patch.
#
# Each patch file starts with a one-line description of its fault, then
# optional header lines, then a diff against the tree:
#
#   Packages: <go test packages>   the tier for this fault (the default
#                                  tier otherwise)
#   Killed-by: <test> ...          the tests that kill it (top-level test
#                                  or fuzz target names, or one TestX/Sub
#                                  alone for a subtest), with "(hook
#                                  build)" at the end where only -tags
#                                  atomicsem_hooks does
#
# The script copies the tree (tracked and untracked files that git does not
# ignore) to a temporary directory, checks that every tier passes there,
# and then, for each patch: applies it, runs the tests its Killed-by line
# names, and only if they pass (or the patch names none) the whole tier,
# which must fail, and takes the patch out again. The named tests run in
# the tier's packages that declare them, so a mutant pays for one test
# binary and the tests that kill it rather than for every test -failfast
# meets before them. The tier is the tests and the fuzz targets' seed
# corpora, not the examples: go test runs those even after -failfast has
# stopped the tests, and on a broken build one may wait for ever. It runs
# without build tags first and, if that did not fail, with
# -tags atomicsem_hooks. A failing test, a panic or a test timeout kills
# the mutant; a fault that passes the named tests and both runs of the
# tier survived.
#
# A Killed-by line is a shortcut, never the proof's only witness: a mutant
# that its named tests miss still runs the whole tier and is killed or
# survives there. Killed that way, it is reported with a warning naming
# the test that did kill it, and the summary lists it, so that the line is
# brought up to date; this is not an error, since a test that kills by
# chance (a race) may miss once while the fault is still caught. A
# Killed-by line naming a test that no test file of the tier declares (a
# renamed or deleted test) is an error, as is a patch that no longer
# applies or a mutant that does not build: the set must be kept current as
# the code changes.
#
# Usage: scripts/mutants.sh [name...]   default: every scripts/mutants/*.patch
# Environment: MUTANT_PKGS (the default tier's packages), MUTANT_TIMEOUT
# (go test -timeout of a mutant's run, in seconds with an "s", default
# 120s; a tier whose clean run takes more than a third of it gets three
# times that, so that a slower machine does not pass a slow tier off as a
# hung mutant), MUTANT_FLAGS (extra go test flags), MUTANT_KILLERS (off:
# every mutant runs its whole tier, ignoring Killed-by lines, as it does
# when MUTANT_PKGS is set or MUTANT_FLAGS has a -run of its own),
# MUTANT_JOBS (patches tried at once, each in a copy of its own; default
# 2, since most of a run is spent waiting on timers, servers and the
# linker).
# Exits non-zero if the clean tree fails, a mutant survives, or a run errs.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

pkgs=${MUTANT_PKGS:-./atomicsem/... ./fuzz/... ./token/... ./event/...}
timeout=${MUTANT_TIMEOUT:-120s}
extra=${MUTANT_FLAGS:-}
jobs=${MUTANT_JOBS:-2}
killers=${MUTANT_KILLERS:-on}
if [[ -n ${MUTANT_PKGS:-} || " $extra " == *" -run"[\ =]* || " $extra " == *" -test.run"[\ =]* ]]; then
	killers=off
fi
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

# header PATCH FIELD: the value of the patch's "FIELD: ..." line, looked
# for in the lines before its diff.
header() {
	awk -v f="$2: " '/^(diff |--- )/ {exit} index($0, f) == 1 {print substr($0, length(f) + 1); exit}' "$1"
}

# tier TAGS LOG [PKGS [TIMEOUT [RUN]]]: runs the tier (on PKGS, or the
# default packages) in the copy, with go test's -timeout TIMEOUT (default
# $timeout) and -run RUN (default: every test and fuzz target); prints
# "pass", "fail" or "error" and the seconds it took.
tier() {
	local tags=$1 log=$2 run=${3:-$pkgs} tmo=${4:-$timeout} pat=${5:-'^(Test|Fuzz)'} start end rc secs dir=$tree mod
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
	(cd "$dir" && go test -count=1 -failfast -run "$pat" -timeout "$tmo" $extra -tags "$tags" $run) >"$log" 2>&1
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

# declaring TIER NAME...: the packages among TIER's (go test patterns:
# ./dir or ./dir/...) whose test files declare a test or fuzz target of
# each NAME (a subtest's by its top-level name), as ./dir/, one per line;
# and "missing NAME" for each NAME that none declares.
declaring() {
	local tier=$1 p base name top found
	shift
	local dirs=()
	for p in $tier; do
		base=${p#./}
		if [[ $base == ... || $base == */... ]]; then
			base=${base%...}
			dirs+=("r:${base%/}")
		else
			dirs+=("d:${base%/}")
		fi
	done
	for name in "$@"; do
		top=${name%%/*}
		found=$(for d in "${dirs[@]}"; do
			base=$tree/${d#?:}
			base=${base%/}
			if [[ $d == r:* ]]; then
				grep -rlE --include='*_test.go' "^func ${top}\(" "$base" 2>/dev/null
			else
				grep -lE "^func ${top}\(" "$base"/*_test.go 2>/dev/null
			fi
		done | grep -v '/testdata/' | sed -e "s|^$tree/||" -e 's|/[^/]*$||' -e 's|^|./|' -e 's|$|/|' | sort -u)
		if [[ -z $found ]]; then
			echo "missing $name"
		else
			echo "$found"
		fi
	done | sort -u
}

# The clean tree must pass every tier a patch names, as well as the default:
# the main module's packages in one run, each nested module's in its own.
cleantiers=("$pkgs")
for name in "${names[@]}"; do
	own=$(header "scripts/mutants/$name.patch" Packages)
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
[[ $killers != off ]] && echo "mutants: each patch's Killed-by tests first, the whole tier only if they miss it; $jobs at a time"

# The clean runs: each tier plain and, for the main module's (the hooks
# live in atomicsem, which no nested module imports), with the hooks; the
# workers take them in turn, each in its own copy, as they take the
# patches below. claim I reports whether this worker is the first to take
# item I of the current list.
claim() {
	mkdir "$work/claim.$1" 2>/dev/null
}
cleanruns=()
for t in "${cleantiers[@]}"; do
	cleanruns+=("|$t")
	[[ $t == "${cleantiers[0]}" ]] && cleanruns+=("atomicsem_hooks|$t")
done
for ((w = 0; w < jobs; w++)); do
	(
		tree=$work/tree.$w
		for i in "${!cleanruns[@]}"; do
			claim "clean.$i" || continue
			tier "${cleanruns[i]%%|*}" "$work/clean.$i.log" "${cleanruns[i]#*|}" 10m >"$work/clean.$i"
		done
	) &
done
wait

# tiertimeout[TIER] is the -timeout of a mutant's run of TIER: $timeout, or
# three times the tier's longest clean run where that is more. The clean
# runs themselves get ten minutes, go test's default.
declare -A tiertimeout
floor=${timeout%s}
[[ $floor =~ ^[0-9]+$ ]] || floor=0 # not in seconds: $timeout as given
broken=0
for i in "${!cleanruns[@]}"; do
	tags=${cleanruns[i]%%|*}
	t=${cleanruns[i]#*|}
	read -r verdict secs <"$work/clean.$i"
	printf '%-9s %-26s tags=%-16s %6ss  %s\n' "$([[ $verdict == pass ]] && echo CLEAN || echo BROKEN)" "(none)" "${tags:-(none)}" "$secs" "$t"
	if [[ $verdict != pass ]]; then
		grep -E -- '--- FAIL|^FAIL|panic:|build failed' "$work/clean.$i.log" | head -10 | sed 's/^/          /'
		grep -A3 'running tests:' "$work/clean.$i.log" | sed 's/^/          /'
		broken=1
		continue
	fi
	t3=$(awk -v s="$secs" 'BEGIN {print int(3 * s + 1)}')
	if ((floor > 0 && t3 > floor && t3 > ${tiertimeout[$t]:-0})); then
		tiertimeout[$t]=$t3
		echo "          a mutant's run of this tier gets -timeout ${t3}s"
	fi
done
if ((broken)); then
	echo "mutants: the clean tree fails a tier; mutation results would mean nothing"
	exit 1
fi

# mutant NAME: applies the patch in $tree, runs its Killed-by tests and,
# if they miss it, its tier (the hook build only if the plain one missed
# it), takes the patch out again, and prints one line: the verdict, the
# name, the seconds and what killed it; then a warning if the Killed-by
# line missed the mutant or named a test the tier does not declare.
mutant() {
	local name=$1 patch=$root/scripts/mutants/$1.patch own detail dead bad total tags log verdict secs label tiername tmo
	local named ktags knames kpkgs missing note=""
	if ! (cd "$tree" && git apply --check "$patch") 2>"$work/$name.apply.log"; then
		printf '%-9s %-26s %s\n' STALE "$name" "no longer applies: $(head -1 "$work/$name.apply.log")"
		return
	fi
	(cd "$tree" && git apply "$patch")
	own=$(header "$patch" Packages)
	# A patch's packages in the main module ran clean in the default tier;
	# a nested module's, in their own.
	tiername=${cleantiers[0]}
	[[ -n $own && " ${cleantiers[*]:1} " == *" $own "* ]] && tiername=$own
	tmo=$timeout
	[[ -n ${tiertimeout[$tiername]:-} ]] && tmo=${tiertimeout[$tiername]}s
	detail=() dead=0 bad=0 total=0
	named=""
	[[ $killers != off ]] && named=$(header "$patch" Killed-by)
	if [[ -n $named ]]; then
		ktags=""
		if [[ $named == *"(hook build)"* ]]; then
			ktags=atomicsem_hooks
			named=${named//"(hook build)"/}
		fi
		read -r -a knames <<<"${named//,/ }"
		kpkgs=$(declaring "${own:-$pkgs}" "${knames[@]}")
		missing=$(sed -n 's/^missing //p' <<<"$kpkgs" | paste -sd' ' -)
		kpkgs=$(grep -v '^missing ' <<<"$kpkgs" | paste -sd' ' -)
		if [[ -n $missing ]]; then
			bad=1
			note="Killed-by names $missing, which no test file of its tier (${own:-$pkgs}) declares"
		fi
		# go test splits -run at each slash before it reads the
		# alternatives, so a subtest's name can only stand alone.
		if ((${#knames[@]} > 1)) && [[ " ${knames[*]}" == *" "*/* ]]; then
			bad=1 kpkgs=""
			note="Killed-by names a subtest beside other tests: go test -run cannot take both at once"
		fi
		if [[ -n $kpkgs ]]; then
			log=$work/$name.named.log
			# One alternative per name, each level of a subtest's anchored.
			pat=$(printf '%s\n' "${knames[@]}" | sed -e 's|/|$/^|g' -e 's|^|^|' -e 's|$|$|' | paste -sd'|' -)
			read -r verdict secs < <(tier "$ktags" "$log" "$kpkgs" "$tmo" "$pat")
			total=$secs
			label="named${ktags:+ (hooks)}"
			case $verdict in
			fail) dead=1 && detail+=("$label: killed ${secs}s by $(why "$log")") ;;
			pass)
				detail+=("$label: passed ${secs}s")
				[[ -z $note ]] && note="Killed-by (${named% }) missed it: name the test that killed it"
				;;
			error) bad=1 && note="" && detail+=("$label: build error") ;;
			esac
		fi
	fi
	if ! ((dead)) && ! grep -q 'build error' <<<"${detail[*]:-}"; then
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
	fi
	(cd "$tree" && git apply -R "$patch")
	if ((bad)); then
		verdict=ERROR
	elif ((dead)); then
		verdict=KILLED
	else
		verdict=SURVIVED
		note=""
	fi
	printf '%-9s %-26s %6ss  %s\n' "$verdict" "$name" "$total" "$(IFS=';'; echo "${detail[*]}" | sed 's/;/; /g')"
	if grep -q 'build error' <<<"${detail[*]}"; then
		grep -h -A5 'build failed\|setup failed' "$work/$name".*.log | head -10 | sed 's/^/          /'
	fi
	[[ -n $note ]] && echo "          warning: $note"
}

# The workers take the patches in turn, each in its own copy, the next
# free patch as each finishes one; a worker's lines are printed as it
# finishes each patch.
for ((w = 0; w < jobs; w++)); do
	(
		tree=$work/tree.$w
		for i in "${!names[@]}"; do
			claim "$i" || continue
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
list() {
	awk -v v="$1" '$1 ~ v {print $2}' <<<"$results" | sort | paste -sd' ' -
}
[[ $survived -gt 0 ]] && echo "mutants: survived (the tests miss the fault): $(list '^SURVIVED$')"
[[ $errors -gt 0 ]] && echo "mutants: errors (a patch to bring up to date, see its lines above): $(list '^(STALE|ERROR)$')"
stale=$(awk '/^(KILLED|SURVIVED|ERROR|STALE)/ {n = $2} /^ +warning: Killed-by \(/ {print n}' <<<"$results" | sort | paste -sd' ' -)
[[ -n $stale ]] && echo "mutants: warning: killed only by the whole tier, past their Killed-by line: $stale"
((survived == 0 && errors == 0))
