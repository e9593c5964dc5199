#!/usr/bin/env bash
# spin.sh model-checks docs/spin/semaphore.pml with SPIN.
#
# The clean configurations must verify with no errors. Every negative control
# (a BUG_ variant: a known way to break the protocol) and every reachability
# probe (a REACH_ variant: an assertion that a situation never arises, which
# must be refuted to show the clean runs reach it) must report an error.
# One line per run: verdict, variant, states stored, transitions, seconds.
#
# Usage: scripts/spin.sh              the standard runs (2 to 3 minutes)
#        SPIN_LONG=1 scripts/spin.sh  adds two larger configurations
# Needs spin (apt-get install spin) and a C compiler.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
model=$root/docs/spin/semaphore.pml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

command -v spin >/dev/null || { echo "spin.sh: spin not found (apt-get install spin)" >&2; exit 2; }
cc=${CC:-gcc}
panflags=${PANFLAGS:--m200000}
memlim=${SPIN_MEMLIM_MB:-4096}

failures=0

# run EXPECT DEFINES...: EXPECT is pass (no errors allowed), fail (some
# error required), or fail:REGEX (the first error reported must match REGEX;
# the model names its checks, e.g. W_no_lost_wakeup, F_fifo).
run() {
	local expect=$1
	shift
	local name=${*:-clean}
	local dir=$work/$(echo "$name" | tr ' =' '_-')
	local defs=()
	for d in "$@"; do defs+=("-D$d"); done
	mkdir -p "$dir"
	(cd "$dir" && spin "${defs[@]}" -a "$model" >spin.log 2>&1) || {
		echo "ERROR    $name: spin -a failed"; cat "$dir/spin.log"; failures=$((failures + 1)); return
	}
	# A control or probe stops at its first error, so compiling pan costs it
	# more than the search: it is built without optimization (-O0 compiles
	# in a fifth of the time and searches at half the speed).
	local opt=-O2
	[[ $expect == fail* ]] && opt=-O0
	(cd "$dir" && $cc -w $opt -DSAFETY -DCOLLAPSE -DMEMLIM="$memlim" -o pan pan.c) || {
		echo "ERROR    $name: compiling pan failed"; failures=$((failures + 1)); return
	}
	local start end out errors states trans secs verdict first
	start=$(date +%s.%N)
	out=$(cd "$dir" && ./pan $panflags 2>&1) || true
	end=$(date +%s.%N)
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' <<<"$out" | tail -1)
	states=$(awk '/states, stored/ {print $1}' <<<"$out" | tail -1)
	trans=$(awk '/transitions \(= stored\+matched\)/ {print $1}' <<<"$out" | tail -1)
	secs=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')
	first=$(awk '/pan:[0-9]+:/ {print; exit}' <<<"$out")
	local incomplete=""
	if grep -q 'max search depth too small\|out of memory\|search not completed' <<<"$out"; then
		incomplete=" (search incomplete)"
	fi
	case $expect in
	pass)
		if [[ $errors == 0 && -z $incomplete ]]; then verdict=PASS; else verdict=FAIL; failures=$((failures + 1)); fi
		;;
	fail*)
		local want=.
		[[ $expect == fail:* ]] && want=${expect#fail:}
		if [[ -n $errors && $errors != 0 ]] && grep -qE "$want" <<<"$first"; then
			verdict=CAUGHT
		else
			verdict=MISSED
			failures=$((failures + 1))
		fi
		;;
	esac
	printf '%-7s %-34s errors=%-2s states=%-10s transitions=%-12s %ss%s\n' \
		"$verdict" "$name" "${errors:-?}" "${states:-?}" "${trans:-?}" "$secs" "$incomplete"
	if [[ $verdict == FAIL || $verdict == MISSED ]]; then
		grep -E 'pan:[0-9]+:|assertion violated|invalid end state' <<<"$out" | head -3 | sed 's/^/        /'
	fi
	if [[ $verdict == CAUGHT ]]; then
		echo "        ${first:0:100}"
	fi
}

echo "spin: $(spin -V)"
echo "-- clean configurations (must verify)"
run pass
run pass CLIENT1_ROUNDS=2
run pass MAXP=2 INIT=1
run pass WANT0=1 INIT=1
run pass WITH_CLOSE
run pass WITH_CLOSE CLIENT1_ROUNDS=2
if [[ ${SPIN_LONG:-} == 1 ]]; then
	run pass MAXP=2 INIT=2 CLIENT1_ROUNDS=2
	run pass CLIENT1_ROUNDS=3
fi

echo "-- negative controls (must be caught)"
run fail:I8_only_lock_writes BUG_SKIP_WAKE
run fail:W_no_lost_wakeup NO_I8 BUG_SKIP_WAKE
run fail BUG_NO_CANCEL_NOTIFY
run fail BUG_LOSE_ON_CANCEL
run fail WANT0=1 INIT=1 BUG_NO_WAIT_FOR_WAKE
run fail BUG_NONATOMIC
run fail BUG_NO_SKIP
run fail BUG_OVERTAKE
run fail:F_fifo NO_I8 BUG_OVERTAKE
run fail WITH_CLOSE BUG_DROP_CLOSED
run fail BUG_ELIGIBLE_NOT_SET
run fail BUG_ELIGIBLE_IS_QUEUED
run fail BUG_LIMIT_LOCKFREE
run fail BUG_LIMIT_DISPATCH_AFTER
run fail BUG_LIMIT_CHECKS_ELIGIBLE
# The faults that concern the queue flags again, with I6 (the flags match the
# queue) and I8 (no lock-free write while eligible is set) turned off: each
# must still leave a waiter asleep (W) or let an arrival overtake one (F),
# not only set a flag wrongly.
run fail:'W_no_lost_wakeup|F_fifo' NO_I6 NO_I8 BUG_NO_CANCEL_NOTIFY
run fail:'W_no_lost_wakeup|F_fifo' NO_I6 NO_I8 BUG_NO_SKIP
run fail:'W_no_lost_wakeup|F_fifo' NO_I6 NO_I8 BUG_ELIGIBLE_NOT_SET
run fail:'W_no_lost_wakeup|F_fifo' NO_I6 NO_I8 BUG_ELIGIBLE_IS_QUEUED
run fail:'W_no_lost_wakeup|F_fifo' NO_I6 NO_I8 BUG_LIMIT_LOCKFREE
run fail:'W_no_lost_wakeup|F_fifo' NO_I6 NO_I8 BUG_LIMIT_DISPATCH_AFTER
run fail:'W_no_lost_wakeup|F_fifo' NO_I6 NO_I8 BUG_LIMIT_CHECKS_ELIGIBLE

echo "-- reachability probes (must be refuted)"
run fail REACH_DEBT
run fail REACH_SKIP
run fail REACH_GRANT_CANCEL
run fail WANT0=1 INIT=1 REACH_WAKE_AFTER_UNLOCK
run fail WITH_CLOSE REACH_CLOSE_PARKED
run fail REACH_QUEUED_NOT_ELIGIBLE
run fail REACH_PASS_OVERSIZED
run fail REACH_LIMIT_GRANTS
run fail WANT0=1 INIT=1 REACH_SKIP_CAS

if ((failures > 0)); then
	echo "spin: $failures run(s) did not give the expected verdict"
	exit 1
fi
echo "spin: all runs gave the expected verdict"
