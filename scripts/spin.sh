#!/usr/bin/env bash
# spin.sh model-checks docs/spin/semaphore.pml with SPIN.
#
# The clean configurations must verify with no errors. Every negative control
# (a BUG_ variant: a known way to break the protocol) and every reachability
# probe (a REACH_ variant: an assertion that a situation never arises, which
# must be refuted to show the clean runs reach it) must report an error.
# One line per run: verdict, variant, states stored, transitions, seconds
# (pan's search alone).
#
# Usage: scripts/spin.sh              the standard runs (under 3 minutes of
#                                     CPU time, run two at a time)
#        SPIN_LONG=1 scripts/spin.sh  adds four larger configurations
# Environment: SPIN_JOBS (runs at once, default 2), SPIN_MEMLIM_MB (pan's
# memory limit per run, default 4096), PANFLAGS, CC.
# Needs spin (apt-get install spin) and a C compiler.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
model=$root/docs/spin/semaphore.pml
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait; rm -rf "$work"' EXIT

command -v spin >/dev/null || { echo "spin.sh: spin not found (apt-get install spin)" >&2; exit 2; }
cc=${CC:-gcc}
panflags=${PANFLAGS:--m200000}
memlim=${SPIN_MEMLIM_MB:-4096}
maxjobs=${SPIN_JOBS:-2}

# check EXPECT [-O1|-O2] DEFINES...: one run. EXPECT is pass (no errors
# allowed), fail (some error required), or fail:REGEX (the first error
# reported must match REGEX; the model names its checks, e.g.
# W_no_lost_wakeup, F_fifo). pan is built without optimization unless a
# level is given: -O0 compiles in a fraction of the time, which is what a
# control or probe (stopped at its first error) and a small configuration
# spend most on; the larger clean configurations are given -O1 (a few
# million states) or -O2 (ten million and more), which search two to three
# times as fast.
check() {
	local expect=$1
	shift
	local opt=-O0
	if [[ ${1:-} == -O* ]]; then
		opt=$1
		shift
	fi
	local name=${*:-clean}
	local dir=$work/$(echo "$name" | tr ' =' '_-')
	local defs=()
	for d in "$@"; do defs+=("-D$d"); done
	mkdir -p "$dir"
	(cd "$dir" && spin "${defs[@]}" -a "$model" >spin.log 2>&1) || {
		echo "ERROR   $name: spin -a failed"; cat "$dir/spin.log"; return 1
	}
	(cd "$dir" && $cc -w $opt -DSAFETY -DCOLLAPSE -DMEMLIM="$memlim" -o pan pan.c) || {
		echo "ERROR   $name: compiling pan failed"; return 1
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
		if [[ $errors == 0 && -z $incomplete ]]; then verdict=PASS; else verdict=FAIL; fi
		;;
	fail*)
		local want=.
		[[ $expect == fail:* ]] && want=${expect#fail:}
		if [[ -n $errors && $errors != 0 ]] && grep -qE "$want" <<<"$first"; then
			verdict=CAUGHT
		else
			verdict=MISSED
		fi
		;;
	esac
	printf '%-7s %-52s errors=%-2s states=%-10s transitions=%-12s %ss%s\n' \
		"$verdict" "$name" "${errors:-?}" "${states:-?}" "${trans:-?}" "$secs" "$incomplete"
	if [[ $verdict == FAIL || $verdict == MISSED ]]; then
		grep -E 'pan:[0-9]+:|assertion violated|invalid end state' <<<"$out" | head -3 | sed 's/^/        /'
	fi
	if [[ $verdict == CAUGHT ]]; then
		echo "        ${first:0:100}"
	fi
	[[ $verdict == PASS || $verdict == CAUGHT ]]
}

# The runs go to a pool of maxjobs background jobs; each writes its report
# to out.N and marks it done, and the reports are printed in the order the
# runs were listed, each as soon as it and those before it are done.
count=0
printed=0
flush() {
	while [[ -e $work/done.$printed ]]; do
		cat "$work/out.$printed"
		printed=$((printed + 1))
	done
}
say() {
	echo "$*" >"$work/out.$count"
	touch "$work/done.$count"
	count=$((count + 1))
	flush
}
run() {
	local i=$count
	count=$((count + 1))
	while (($(jobs -rp | wc -l) >= maxjobs)); do
		wait -n || true
		flush
	done
	(
		check "$@" >"$work/out.$i" 2>&1 || touch "$work/failed.$i"
		touch "$work/done.$i"
	) &
}

began=$(date +%s)
echo "spin: $(spin -V), $maxjobs runs at once"
say "-- clean configurations (must verify)"
run pass -O2
run pass -O2 CLIENT1_ROUNDS=2 CLIENT2_ACQUIRES
run pass -O1 MAXP=2 INIT=1
run pass -O1 WANT0=1 INIT=1
run pass WITH_CLOSE
run pass WITH_CLOSE CLIENT1_ROUNDS=2
if [[ ${SPIN_LONG:-} == 1 ]]; then
	run pass -O2 CLIENT1_ROUNDS=2
	run pass -O2 WANT0=1 INIT=1 CLIENT1_ROUNDS=2 CLIENT2_ACQUIRES
	run pass -O2 MAXP=2 INIT=2 CLIENT1_ROUNDS=2
	run pass -O2 CLIENT1_ROUNDS=3 CLIENT2_ACQUIRES
fi

say "-- negative controls (must be caught)"
run fail:I8_only_lock_writes BUG_SKIP_WAKE
run fail:W_no_lost_wakeup NO_I8 BUG_SKIP_WAKE
run fail:I6_queue_state BUG_NO_CANCEL_NOTIFY
run fail:E_holds_nothing BUG_LOSE_ON_CANCEL
run fail:E_event_clear WANT0=1 INIT=1 BUG_NO_WAIT_FOR_WAKE
run fail:'invalid end state' BUG_WOKE_WAITS_AGAIN
run fail:I4_held_matches_tokens BUG_NONATOMIC
run fail:I6_queue_state BUG_NO_SKIP
run fail:I8_only_lock_writes BUG_OVERTAKE
run fail:F_fifo NO_I8 BUG_OVERTAKE
run fail:I5_closed_stays WITH_CLOSE BUG_DROP_CLOSED
run fail:I6_queue_state BUG_ELIGIBLE_NOT_SET
run fail:I6_queue_state BUG_ELIGIBLE_IS_QUEUED
run fail:I7_never_starving MAXP=2 INIT=1 BUG_QUEUE_OR
run fail:I8_only_lock_writes BUG_LIMIT_LOCKFREE
run fail:I8_only_lock_writes BUG_LIMIT_DISPATCH_AFTER
run fail:I6_queue_state BUG_LIMIT_CHECKS_ELIGIBLE
run fail:I6_queue_state BUG_QUEUE_BEHIND_NO_RECHECK
# The faults that concern the queue state again, with I6 (the state matches
# the queue) and I8 (no lock-free write while eligible) turned off: each
# must still leave a waiter asleep (W) or let an arrival overtake one (F),
# not only set the state wrongly.
run fail:'W_no_lost_wakeup|F_fifo' NO_I6 NO_I8 BUG_NO_CANCEL_NOTIFY
run fail:'W_no_lost_wakeup|F_fifo' NO_I6 NO_I8 BUG_NO_SKIP
run fail:'W_no_lost_wakeup|F_fifo' NO_I6 NO_I8 BUG_ELIGIBLE_NOT_SET
run fail:'W_no_lost_wakeup|F_fifo' NO_I6 NO_I8 BUG_ELIGIBLE_IS_QUEUED
run fail:'W_no_lost_wakeup|F_fifo' NO_I6 NO_I8 BUG_LIMIT_LOCKFREE
run fail:'W_no_lost_wakeup|F_fifo' NO_I6 NO_I8 BUG_LIMIT_DISPATCH_AFTER
run fail:'W_no_lost_wakeup|F_fifo' NO_I6 NO_I8 BUG_LIMIT_CHECKS_ELIGIBLE
run fail:'W_no_lost_wakeup|F_fifo' NO_I6 NO_I8 BUG_QUEUE_BEHIND_NO_RECHECK
# The idle faults, with client 2 calling WaitIdle; then with I6 and I9 off
# (the idle flag matches the WaitIdle callers, and is never set with
# nothing held), each must still leave a WaitIdle caller parked with
# nothing held (WI), and with WI off as well, parked at the end (an invalid
# end state).
run fail:I9_idle_needs_held CLIENT2_WAITS_IDLE BUG_IDLE_LOCKFREE
run fail:I9_idle_needs_held CLIENT2_WAITS_IDLE BUG_FORGET_IDLE_LOCKFREE
run fail:I9_idle_needs_held CLIENT2_WAITS_IDLE BUG_IDLE_NOT_CLEARED
run fail:I6_queue_state CLIENT2_WAITS_IDLE BUG_IDLE_NOT_WOKEN
run fail:Z_idle_saw_zero CLIENT2_WAITS_IDLE BUG_IDLE_BEFORE_GRANT
run fail:WI_no_lost_idle_wakeup CLIENT2_WAITS_IDLE NO_I6 NO_I9 BUG_IDLE_LOCKFREE
run fail:WI_no_lost_idle_wakeup CLIENT2_WAITS_IDLE NO_I6 NO_I9 BUG_FORGET_IDLE_LOCKFREE
run fail:WI_no_lost_idle_wakeup CLIENT2_WAITS_IDLE NO_I6 NO_I9 BUG_IDLE_NOT_WOKEN
run fail:'invalid end state' CLIENT2_WAITS_IDLE NO_I6 NO_I9 NO_WI BUG_IDLE_NOT_WOKEN

say "-- reachability probes (must be refuted)"
run fail:PROBE_reached REACH_DEBT
run fail:PROBE_reached REACH_SKIP
run fail:PROBE_reached REACH_GRANT_CANCEL
run fail:PROBE_reached WANT0=1 INIT=1 REACH_WAKE_AFTER_UNLOCK
run fail:PROBE_reached WITH_CLOSE REACH_CLOSE_PARKED
run fail:PROBE_reached REACH_QUEUED_NOT_ELIGIBLE
run fail:PROBE_reached REACH_PASS_OVERSIZED
run fail:PROBE_reached REACH_LIMIT_GRANTS
run fail:PROBE_reached -O1 WANT0=1 INIT=1 CLIENT1_ROUNDS=2 CLIENT2_ACQUIRES REACH_SKIP_CAS
run fail:PROBE_reached CLIENT2_WAITS_IDLE REACH_IDLE_WAKE
run fail:PROBE_reached CLIENT2_WAITS_IDLE REACH_IDLE_CANCEL

wait
flush
failures=$(find "$work" -maxdepth 1 -name 'failed.*' | wc -l)
echo "spin: $(($(date +%s) - began)) s in all"
if ((failures > 0)); then
	echo "spin: $failures run(s) did not give the expected verdict"
	exit 1
fi
echo "spin: all runs gave the expected verdict"
