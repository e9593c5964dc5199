#!/usr/bin/env bash
# run.sh runs the benchmark suite and writes the files docs/benchmarks.md
# quotes: for each group, the raw results to bench/results/GROUP.txt and
# benchstat's tables to bench/results/GROUP.benchstat.txt, each with the
# machine, the Go version and the command at the top.
#
# Usage: bench/run.sh [GROUP...]
#
# Groups (default: every group whose benchmarks are in the tree):
#   core      atomicsem in both modes beside golang.org/x/sync/semaphore, a
#             buffered channel, a mutex+cond and the floors
#   credit    package credit (BenchmarkCredit*)
#   group     package group (BenchmarkGroup*)
#   adaptive  package adaptive (BenchmarkAcquireRecord in bench/adaptive)
#             beside failsafe-go, go-concurrency-limits and a floor, the
#             side-by-side simulation and failure scenarios
#             (results/adaptive-sim.txt), and the plots docs/adaptive.md
#             shows (docs/adaptive-follow.png, docs/adaptive-failure.png)
#   adaptivehttp  adaptive.Handler beside the bare handler, in process and
#             over loopback HTTP (BenchmarkHandler in bench/adaptive)
#   etcdsem   the fleet semaphore against etcd's concurrency.Mutex and a
#             Mutex that watches from the revision after its read, at 1 to
#             64 clients and limits 1 and 4, on an in-process etcd server
#             (BenchmarkFleet in the etcdsem module)
#   manycore  what depends on the number of cores: barging against FIFO
#             and sync.Mutex in the contended hand-offs (BenchmarkContended,
#             BenchmarkContendedYield), the gate at a limit of 10,000 with
#             and without the permit cache against the one-word floors
#             (BenchmarkGate), and credit's one hot bucket against its
#             floors (BenchmarkCreditTrySpendParallel); run with -cpu 1,2
#             unless CPU says otherwise (on a machine with more cores:
#             CPU=1,2,4,8,16)
#   keyed     package keyed's requests (BenchmarkKeyedRequest): limits per
#             key against sync.Map, an LRU and go-limiter's store of
#             per-key limiters, on a million keys; run with -cpu 1,2
#             unless CPU says otherwise
#   keyedmem  package keyed's memory (BenchmarkKeyed{NewKey,Heap,Attack,AtCap}):
#             a new key's cost, the heap per key, and the attack of ten
#             million keys against a cap of 100,000
#   keyedgates  the heap per key of keyed's tables of concurrency limits,
#             a semaphore per key beside a priority gate per key of 1, 2 and
#             4 classes (BenchmarkKeyedLimitHeap), at 100,000 keys
#   keyedhttp keyed.Middleware against go-chi/httprate
#             (BenchmarkKeyedHTTP), with -cpu 1,2
#   overload  package overload: the priority gate's admission beside an
#             uncontended atomicsem acquire of the same limit
#             (BenchmarkGateAdmission), with its floor (the same benchmark
#             built from a copy of the tree with
#             scripts/floors/overload-admission-untested.patch applied,
#             columns gate-1-floor and gate-4-floor beside that build's
#             atomicsem-floorbuild), and the overload experiment through
#             real HTTP (TestOverloadExperiment -overload.long in
#             bench/overload: results/overload-experiment.txt, and the plot
#             docs/overload.png; five trials a cell, pooled: about nine
#             minutes of real time), and the
#             client throttle experiment (TestClientThrottleExperiment:
#             results/overload-throttle.txt; about twenty seconds)
#   rediscredit  the Redis credit backend against go-redis/redis_rate at 1,
#             16 and 64 goroutines, on a redis-server the test binary
#             starts (BenchmarkTrySpend in bench/rediscredit; skipped
#             without redis-server, or REDIS_SERVER naming one)
#   lease     rediscredit's Lease against the Limiter (a call per spend) and
#             an in-process credit.Bucket, at 1, 16 and 64 goroutines
#             (BenchmarkLease in bench/rediscredit); the fleet's law, the
#             idle credit's return and the round trips at steady demand
#             against a real redis-server (the rediscredit module's
#             TestLease* tests, 10 s runs: results/lease-fleet.txt), and the
#             simulation of 1,000 processes on a fake clock
#             (TestSimulation -leasesim.long in bench/leasesim:
#             results/lease-sim.txt); a smoke run (BENCHTIME=1x) runs the
#             short versions
#   pool      etcdsem's Pool against the Semaphore (a key per acquire) and an
#             in-process atomicsem semaphore, at 1, 16 and 64 goroutines
#             (BenchmarkPool in the etcdsem module); the fleet's limit from
#             etcd's history, the idle permits' return, the fair share, a
#             lowered limit and the fail-closed bound (the etcdsem module's
#             TestPool* tests, the fleet run 10 s long: results/pool-fleet.txt)
#   adaptivesim  no benchmark, and run only when named: the adaptive
#             group's simulation, failure scenarios and plots alone
#   adaptivewire  no benchmark, and run only when named: package adaptive's
#             wire scenarios, every controller beside a fixed limit, through
#             Handler, Transport and the gRPC interceptors, in real time over
#             loopback and in fake time (ADAPTIVE_WIRE=full), about 45
#             minutes on 2 CPUs; writes results/adaptive-wire.txt, the tables
#             docs/adaptive.md quotes, and docs/adaptive-wire.png
#
# Environment:
#   COUNT      samples per benchmark (default 10)
#   BENCHTIME  -benchtime of each sample (default 500ms)
#   CPU        -cpu list, e.g. 1,2 (default: GOMAXPROCS only)
#   RESULTS    directory for the results (default bench/results; relative
#              paths are taken from bench/)
#   TABLES     set to 1 to rewrite GROUP.benchstat.txt from the GROUP.txt
#              already there, without running anything
#
# Each test binary is built once and run COUNT times with -count 1, every
# group once per round, so that the samples of every row are spread over
# the same stretch of time: on a shared machine a burst of other work then
# moves all columns alike instead of skewing the one that ran during it.
# Each run sees its round (1 to COUNT) in BENCH_ROUND, so that a benchmark
# may swap the order of what it compares from one round to the next.
# With the defaults, core takes about 15 minutes on 2 CPUs and every group
# about 30.
#
# Results that go to bench/results name the commit that produced them, so
# run.sh refuses to write them from a tree with uncommitted changes (git
# describe --dirty): commit first, then run. Elsewhere (RESULTS=out/...,
# ignored by git) it runs on any tree and records the revision as it is.
# The adaptive group also redraws docs/adaptive-follow.png when its results
# go to bench/results, and draws $RESULTS/adaptive-follow.png otherwise.
set -euo pipefail

cd "$(dirname "$0")"
COUNT=${COUNT:-10}
BENCHTIME=${BENCHTIME:-500ms}
CPU=${CPU:-}
RESULTS=${RESULTS:-results}
TABLES=${TABLES:-}
BENCHSTAT=(go run golang.org/x/perf/cmd/benchstat@v0.0.0-20250813145418-2f7363a06fe1)
ALL_GROUPS=(core credit group adaptive adaptivehttp etcdsem keyed keyedmem keyedgates keyedhttp overload rediscredit manycore lease pool)

# group_pkg and group_pattern say where a group's benchmarks are and which
# they are, and tables how benchstat shows them. A new group is a line in
# each of the three and in ALL_GROUPS.
group_pkg() {
	case $1 in
	core | credit | group | keyed | keyedmem | keyedgates | keyedhttp | overload | manycore) echo . ;;
	adaptive | adaptivehttp) echo ./adaptive ;;
	etcdsem | pool) echo ../etcdsem ;;
	rediscredit | lease) echo ./rediscredit ;;
	*) echo "run.sh: unknown group $1 (groups: ${ALL_GROUPS[*]})" >&2 && exit 2 ;;
	esac
}
group_pattern() {
	case $1 in
	core) echo '^Benchmark(Uncontended|Parallel|Contended|Weighted|Cancel|Throttle|QueueLen|ParkedMemory)$' ;;
	credit) echo '^BenchmarkCredit' ;;
	group) echo '^BenchmarkGroup' ;;
	adaptive) echo '^BenchmarkAcquireRecord$' ;;
	adaptivehttp) echo '^BenchmarkHandler$' ;;
	etcdsem) echo '^BenchmarkFleet$' ;;
	keyed) echo '^BenchmarkKeyedRequest$' ;;
	keyedmem) echo '^BenchmarkKeyed(NewKey|Heap|Attack|AtCap)$' ;;
	keyedgates) echo '^BenchmarkKeyedLimitHeap$' ;;
	keyedhttp) echo '^BenchmarkKeyedHTTP$' ;;
	overload) echo '^BenchmarkGateAdmission$' ;;
	rediscredit) echo '^BenchmarkTrySpend$' ;;
	lease) echo '^BenchmarkLease$' ;;
	pool) echo '^BenchmarkPool$' ;;
	manycore) echo '^Benchmark(Contended|ContendedYield|Gate|CreditTrySpendParallel)$' ;;
	esac
}

# group_cpu is the -cpu list of a group when CPU does not set one.
group_cpu() {
	case $1 in
	keyed | keyedhttp | manycore) echo 1,2 ;;
	esac
}

# tables writes the benchstat tables of group $1 from raw file $2.
tables() {
	local raw=$2
	case $1 in
	core)
		local headline='.name:/^(Uncontended|Parallel|Contended|Weighted|Cancel)$/'
		local users='/impl:(atomicsem OR atomicsem-barging OR xsyncsem OR chan OR mutex)'
		local abs='.unit:(sec/op OR cpu-ns/op OR B/op OR allocs/op)'
		echo "### Headline: atomicsem and what a user would use instead; base x/sync"
		"${BENCHSTAT[@]}" -filter "$headline $users $abs" \
			-col '/impl@(xsyncsem atomicsem atomicsem-barging chan mutex)' "$raw"
		echo
		echo "### Headline, time only; base chan"
		"${BENCHSTAT[@]}" -filter "$headline $users .unit:(sec/op OR cpu-ns/op)" \
			-col '/impl@(chan atomicsem atomicsem-barging xsyncsem mutex)' "$raw"
		echo
		echo "### Floors of the fast paths; base floor"
		"${BENCHSTAT[@]}" -filter '.name:/^(Uncontended|Parallel)$/ .unit:(sec/op OR cpu-ns/op)' \
			-col '/impl@(floor floorcas tokencas wordcas atomicsem)' "$raw"
		echo
		echo "### Floors of the hand-off; base floorpark"
		"${BENCHSTAT[@]}" -filter '.name:Contended' \
			-col '/impl@(floorpark floorparkword atomicsem chan syncmutex atomicsem-barging)' "$raw"
		echo
		echo "### Queue length: one column per parked count"
		"${BENCHSTAT[@]}" -filter '.name:QueueLen .unit:(sec/op OR cpu-ns/op OR allocs/op)' -col /parked "$raw"
		echo
		echo "### Cancellation: cancelled/op is the share of acquires that timed out; ctxonly is the contexts alone"
		"${BENCHSTAT[@]}" -filter '.name:Cancel' \
			-col '/impl@(ctxonly atomicsem atomicsem-barging xsyncsem chan mutex floorpark)' "$raw"
		echo
		echo "### Memory of a parked waiter"
		"${BENCHSTAT[@]}" -filter '.name:ParkedMemory .unit:(B/waiter-net OR B/waiter-raw OR B/semaphore)' -col /impl "$raw"
		echo
		echo "### A live limit: Throttle"
		"${BENCHSTAT[@]}" -filter '.name:Throttle' "$raw"
		;;
	credit) "${BENCHSTAT[@]}" -col '/impl@(credit xrate juju uber floor floorclock)' "$raw" ;;
	group) "${BENCHSTAT[@]}" -col '/impl@(errgroup group group-go conc chanwg)' "$raw" ;;
	adaptive)
		"${BENCHSTAT[@]}" -col '/impl@(failsafe adaptive-aimd adaptive-vegas adaptive-gradient2 failsafe-100ms gcl-gradient2 gcl-gradient2-100ms gcl-vegas gcl-vegas-100ms floor)' "$raw"
		;;
	adaptivehttp) "${BENCHSTAT[@]}" -col '/impl@(bare adaptive)' "$raw" ;;
	etcdsem) "${BENCHSTAT[@]}" -col /impl "$raw" ;;
	keyed) "${BENCHSTAT[@]}" -col '/impl@(golimiter keyed syncmap lru floor floorclock)' "$raw" ;;
	keyedmem)
		echo "### A new key, and the heap per key of a million; base go-limiter"
		"${BENCHSTAT[@]}" -filter '.name:/^Keyed(NewKey|Heap)$/' \
			-col '/impl@(golimiter keyed syncmap lru floor floorclock)' "$raw"
		echo
		echo "### The attack: 10,000,000 new keys against a cap of 100,000"
		"${BENCHSTAT[@]}" -filter '.name:KeyedAttack' -col /impl "$raw"
		echo
		echo "### A new key refused at the cap, every key mid-limit"
		"${BENCHSTAT[@]}" -filter '.name:KeyedAtCap' -col /impl "$raw"
		;;
	keyedgates) "${BENCHSTAT[@]}" -col '/impl@(semaphores gates-1 gates-2 gates-4)' "$raw" ;;
	keyedhttp) "${BENCHSTAT[@]}" -col '/impl@(httprate keyed)' "$raw" ;;
	overload)
		echo "### The gate's admission; base atomicsem"
		"${BENCHSTAT[@]}" -filter '/impl:(atomicsem OR gate-1 OR gate-2 OR gate-4)' \
			-col '/impl@(atomicsem gate-1 gate-2 gate-4)' "$raw"
		echo
		echo "### The floor: the gate with its admission test taken out, from a build of its own; base that build's atomicsem"
		"${BENCHSTAT[@]}" -filter '/impl:(atomicsem-floorbuild OR gate-1-floor OR gate-4-floor) .unit:(sec/op OR cpu-ns/op)' \
			-col '/impl@(atomicsem-floorbuild gate-1-floor gate-4-floor)' "$raw"
		;;
	rediscredit) "${BENCHSTAT[@]}" -col '/impl@(redis_rate rediscredit ping)' "$raw" ;;
	lease) "${BENCHSTAT[@]}" -col '/impl@(limiter lease bucket)' "$raw" ;;
	pool) "${BENCHSTAT[@]}" -col '/impl@(etcdsem pool atomicsem)' "$raw" ;;
	manycore)
		local t='.unit:(sec/op OR cpu-ns/op OR switches/op)'
		echo "### Contended hand-off: barging against FIFO and sync.Mutex; base atomicsem (FIFO)"
		"${BENCHSTAT[@]}" -filter ".name:Contended $t" -col '/impl@(atomicsem atomicsem-barging syncmutex)' "$raw"
		echo
		echo "### Contended hand-off, holders that yield while holding; base atomicsem (FIFO)"
		"${BENCHSTAT[@]}" -filter ".name:ContendedYield $t" -col '/impl@(atomicsem atomicsem-barging syncmutex chan)' "$raw"
		echo
		echo "### The gate at a limit of 10,000; base floorcas (the one-word CAS floor)"
		"${BENCHSTAT[@]}" -filter '.name:Gate .unit:(sec/op OR cpu-ns/op)' -col '/impl@(floorcas atomicsem atomicsem-cache floor)' "$raw"
		echo
		echo "### The gate: the permit cache against the word; base atomicsem"
		"${BENCHSTAT[@]}" -filter '.name:Gate .unit:cpu-ns/op' -col '/impl@(atomicsem atomicsem-cache)' "$raw"
		echo
		echo "### Credit's one hot bucket; base floor"
		"${BENCHSTAT[@]}" -filter '.name:CreditTrySpendParallel .unit:(sec/op OR cpu-ns/op)' \
			-col '/impl@(floor credit floorclock floorlock xrate juju)' "$raw"
		;;
	esac
}

groups=("$@")
if [ ${#groups[@]} -eq 0 ]; then
	groups=("${ALL_GROUPS[@]}")
fi
# adaptivesim and adaptivewire are no benchmark groups: they are run apart,
# below.
wire= sim=
bench_groups=()
for g in "${groups[@]}"; do
	case $g in
	adaptivewire) wire=1 ;;
	adaptivesim) sim=1 ;;
	*) bench_groups+=("$g") ;;
	esac
done
groups=("${bench_groups[@]}")
for g in "${groups[@]}"; do
	[ "$g" = adaptive ] && sim=
done

# published reports whether the results go to bench/results, where only
# those of a committed tree belong.
published() { [ "$(cd "$RESULTS" 2>/dev/null && pwd -P)" = "$(pwd -P)/results" ]; }

mkdir -p out "$RESULTS"
if [ -z "$TABLES" ] && published; then
	rev=$(git describe --always --dirty 2>/dev/null || echo unknown)
	if [[ $rev == *-dirty || $rev == unknown ]]; then
		echo "run.sh: the tree is at $rev; bench/results holds only results of a committed tree:" >&2
		echo "run.sh: commit first, or set RESULTS to a directory under bench/out" >&2
		exit 1
	fi
fi

if [ -n "$TABLES" ]; then
	for g in "${groups[@]}"; do
		[ -f "$RESULTS/$g.txt" ] || continue
		{
			grep '^#' "$RESULTS/$g.txt"
			echo
			tables "$g" "$RESULTS/$g.txt"
		} >"$RESULTS/$g.benchstat.txt"
		echo "run.sh: wrote $RESULTS/$g.benchstat.txt" >&2
	done
	exit 0
fi

# The revision is read once, before anything is written: a header written
# into a results file that git tracks would otherwise see that file
# truncated by its own redirection, and call the tree dirty.
REV=$(git describe --always --dirty 2>/dev/null || echo "an unknown revision")
header() {
	echo "# $(lscpu | grep -m1 'Model name' | sed 's/.*: *//') (family $(lscpu | grep -m1 'CPU family' | sed 's/.*: *//') model $(lscpu | grep -m1 '^Model:' | sed 's/.*: *//')), $(nproc) CPUs, $(uname -sr)"
	echo "# $(go version); load average at the start:$(cut -d' ' -f1-3 /proc/loadavg | sed 's/^/ /')"
	local cpu=${CPU:-$(group_cpu "$1")}
	echo "# $(date -u +%Y-%m-%d) COUNT=$COUNT BENCHTIME=$BENCHTIME CPU=${cpu:-default} bench/run.sh $1, at $REV"
	if [ "$1" = rediscredit ] || [ "$1" = lease ]; then
		echo "# $("${REDIS_SERVER:-redis-server}" --version)"
	fi
}

# bin_of names the test binary of package $1.
bin_of() {
	if [ "$1" = . ]; then echo out/bench.test; else echo "out/$(basename "$1").test"; fi
}

# The wire scenarios write every verdict, with the limits' traces, to
# out/adaptive-wire.jsonl; TestWireReport (bench/adaptive) turns them into
# the tables and the plot. A verdict that misses is a result, not an error
# of the run: the tables show it.
if [ -n "$wire" ]; then
	raw=$PWD/out/adaptive-wire.jsonl
	rm -f "$raw"
	header adaptivewire >out/adaptive-wire.header
	echo "== adaptivewire: package adaptive (Handler, Transport)" >&2
	(cd .. && ADAPTIVE_WIRE=full ADAPTIVE_WIRE_OUT=$raw go test -count=1 -timeout 150m \
		-run '^TestWireScenarios(InFakeTime)?$' ./adaptive) >out/adaptive-wire.log 2>&1 || true
	echo "== adaptivewire: module adaptivegrpc (the gRPC interceptors)" >&2
	(cd ../adaptivegrpc && ADAPTIVE_WIRE=full ADAPTIVE_WIRE_OUT=$raw go test -count=1 -timeout 150m \
		-run '^TestWireScenarios(InFakeTime)?$' .) >>out/adaptive-wire.log 2>&1 || true
	plots=$PWD/../docs
	[ "$RESULTS" = results ] || plots=$(cd "$RESULTS" && pwd)
	(cd adaptive && go test -count=1 -run '^TestWireReport$' . -adaptive.wirein "$raw" \
		-adaptive.wiretable "$PWD/../out/adaptive-wire.tables" -adaptive.wireplot "$plots/adaptive-wire.png") >&2
	{
		echo "# The wire scenarios (adaptive/adaptivetest/wire), every controller beside a fixed limit (TestWireScenarios and TestWireScenariosInFakeTime, ADAPTIVE_WIRE=full, in package adaptive and module adaptivegrpc)"
		sed -n 1,3p out/adaptive-wire.header
		echo "# load average at the end:$(cut -d' ' -f1-3 /proc/loadavg | sed 's/^/ /')"
		echo
		cat out/adaptive-wire.tables
	} >"$RESULTS/adaptive-wire.txt"
	echo "run.sh: wrote $RESULTS/adaptive-wire.txt and $plots/adaptive-wire.png" >&2
fi

# build_floor builds out/bench-floor.test, the overload group's floor: the
# benchmark module's tests from a copy of the tree (the files git tracks or
# would track, as they are in the tree) with the floor patch applied.
build_floor() {
	local tree=$PWD/out/floortree
	rm -rf "$tree" && mkdir -p "$tree"
	(cd .. && git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do
		[ -e "$f" ] && printf '%s\0' "$f"
	done | xargs -0 cp --parents -t "$tree")
	# The copy lies inside the repository: the ceiling keeps git apply from
	# finding it, so that it patches the copy as a plain directory.
	(cd "$tree" && GIT_CEILING_DIRECTORIES=$(dirname "$tree") git apply scripts/floors/overload-admission-untested.patch)
	(cd "$tree/bench" && go test -c -o "$OLDPWD/out/bench-floor.test" .)
}

# Build each package's test binary once, and keep the groups that have
# benchmarks in the tree.
declare -A built
run=()
for g in "${groups[@]}"; do
	pkg=$(group_pkg "$g")
	if [ ! -d "$pkg" ]; then
		echo "run.sh: $g: no package $pkg in the tree, skipped" >&2
		continue
	fi
	if { [ "$g" = rediscredit ] || [ "$g" = lease ]; } && ! command -v "${REDIS_SERVER:-redis-server}" >/dev/null; then
		echo "run.sh: $g: no redis-server (install it, or set REDIS_SERVER to its path), skipped" >&2
		continue
	fi
	bin=$(bin_of "$pkg")
	if [ -z "${built[$pkg]:-}" ]; then
		# A package of a nested module (its own go.mod) is built from
		# inside that module.
		(cd "$pkg" && go test -c -o "$OLDPWD/$bin" .)
		built[$pkg]=1
	fi
	listed=$("$bin" -test.list "$(group_pattern "$g")")
	if ! grep -q '^Benchmark' <<<"$listed"; then
		echo "run.sh: $g: no benchmarks in the tree, skipped" >&2
		continue
	fi
	run+=("$g")
	header "$g" >"$RESULTS/$g.txt"
	if [ "$g" = overload ]; then
		build_floor
	fi
done

for i in $(seq "$COUNT"); do
	for g in "${run[@]}"; do
		echo "== round $i of $COUNT: $g" >&2
		pkg=$(group_pkg "$g")
		bin=$PWD/$(bin_of "$pkg")
		cpu=${CPU:-$(group_cpu "$g")}
		(cd "$pkg" && BENCH_ROUND=$i "$bin" -test.run '^$' -test.bench "$(group_pattern "$g")" \
			-test.benchmem -test.count 1 -test.benchtime "$BENCHTIME" ${cpu:+-test.cpu "$cpu"}) |
			grep -v -e '^PASS$' -e '^ok ' | tee -a "$RESULTS/$g.txt" >&2
		if [ "$g" = overload ]; then
			(cd "$pkg" && "$OLDPWD/out/bench-floor.test" -test.run '^$' \
				-test.bench '^BenchmarkGateAdmission$/^impl=(atomicsem|gate-1|gate-4)$' \
				-test.benchmem -test.count 1 -test.benchtime "$BENCHTIME" ${cpu:+-test.cpu "$cpu"}) |
				grep '^Benchmark' | sed -e 's,impl=atomicsem/,impl=atomicsem-floorbuild/,' \
				-e 's,impl=gate-\([14]\)/,impl=gate-\1-floor/,' | tee -a "$RESULTS/$g.txt" >&2
		fi
	done
done

for g in "${run[@]}"; do
	{
		grep '^#' "$RESULTS/$g.txt"
		echo
		tables "$g" "$RESULTS/$g.txt"
	} >"$RESULTS/$g.benchstat.txt"
	echo "run.sh: wrote $RESULTS/$g.txt and $RESULTS/$g.benchstat.txt" >&2
done

# The adaptive group, and the adaptivesim group alone, write the
# side-by-side simulation and failure scenarios and AIMD's Timeout table
# that docs/adaptive.md quotes, and draw its plots. They run on a fake
# clock, so one run is exact and takes seconds.
for g in "${run[@]}" ${sim:+adaptive}; do
	[ "$g" = adaptive ] || continue
	[ -x out/adaptive.test ] && [ "${built[./adaptive]:-}" ] || (cd adaptive && go test -c -o "$OLDPWD/out/adaptive.test" .)
	{
		echo "# adaptivetest.Evaluate and adaptivetest.Scenarios, side by side, and AIMD's Timeout (TestSimulationSideBySide -adaptive.long, TestFailureScenariosSideBySide and TestAIMDTimeout in bench/adaptive)"
		header "$([ -n "$sim" ] && echo adaptivesim || echo adaptive)" | sed -n 2,3p
		echo
		(cd adaptive && "$OLDPWD/out/adaptive.test" -test.run '^(TestSimulationSideBySide|TestFailureScenariosSideBySide|TestAIMDTimeout)$' -test.v -adaptive.long) |
			sed -n 's/^        //p'
	} >"$RESULTS/adaptive-sim.txt"
	echo "run.sh: wrote $RESULTS/adaptive-sim.txt" >&2
	# The plots go to docs/, or beside the results when RESULTS names
	# another directory.
	plots=$PWD/../docs
	[ "$RESULTS" = results ] || plots=$(cd "$RESULTS" && pwd)
	(cd adaptive && "$OLDPWD/out/adaptive.test" -test.run '^TestPlot' \
		-adaptive.plot "$plots/adaptive-follow.png" -adaptive.failureplot "$plots/adaptive-failure.png") >/dev/null
	echo "run.sh: wrote $plots/adaptive-follow.png and $plots/adaptive-failure.png" >&2
done

# The overload group also runs the overload experiment, in real time over
# loopback HTTP, once (each of its cells is five trials of five seconds,
# pooled, and reported as they are), and draws its plot. A smoke run of
# this command (BENCHTIME=1x, as CI's) runs the experiment's short version
# instead, one trial, about 15 seconds.
for g in "${run[@]}"; do
	[ "$g" = overload ] || continue
	long=-overload.long
	[ "$BENCHTIME" = 1x ] && long=
	(cd overload && go test -c -o "$OLDPWD/out/overloadexp.test" .)
	plots=$PWD/../docs
	[ "$RESULTS" = results ] || plots=$(cd "$RESULTS" && pwd)
	{
		echo "# the overload experiment (TestOverloadExperiment -overload.experiment ${long:-(its short version)} in bench/overload), real time over loopback HTTP"
		header "$g" | sed -n 2,3p
		echo
		(cd overload && "$OLDPWD/out/overloadexp.test" -test.run '^TestOverloadExperiment$' -test.timeout 20m \
			-overload.experiment $long -overload.out /dev/stdout -overload.plot "$plots/overload.png" |
			grep -v -e '^PASS$' -e '^ok ')
	} >"$RESULTS/overload-experiment.txt"
	{
		echo "# the client throttle experiment (TestClientThrottleExperiment -overload.experiment ${long:-(its short version)} in bench/overload), real time over loopback HTTP"
		header "$g" | sed -n 2,3p
		echo
		(cd overload && "$OLDPWD/out/overloadexp.test" -test.run '^TestClientThrottleExperiment$' -test.timeout 5m \
			-overload.experiment $long -overload.throttleout /dev/stdout | grep -v -e '^PASS$' -e '^ok ')
	} >"$RESULTS/overload-throttle.txt"
	echo "run.sh: wrote $RESULTS/overload-experiment.txt, $RESULTS/overload-throttle.txt and $plots/overload.png" >&2
done

# The lease group also runs, once, the rediscredit module's lease tests
# against a real redis-server (the fleet of eight with shifting demand,
# its law checked on every spend and on Redis's own answers; the idle
# credit's return; the round trips at steady demand), 10 s each, and the
# simulation of 1,000 processes on a fake clock; the pool group, the
# etcdsem module's pool tests, its fleet of eight run 10 s. A smoke run
# (BENCHTIME=1x) runs their short versions, in a few seconds.
for g in "${run[@]}"; do
	case $g in
	lease)
		fleet=10s long=-leasesim.long
		[ "$BENCHTIME" = 1x ] && fleet=1s long=
		{
			echo "# the rediscredit module's lease tests (REDISCREDIT_FLEET=$fleet go test -run 'TestLease(FleetKeepsTheLaw|IdleCredit|CallsAtSteady)' -v), against redis-server"
			header "$g"
			echo
			(cd ../rediscredit && REDISCREDIT_FLEET=$fleet go test -count=1 -run '^TestLease(FleetKeepsTheLaw|IdleCreditGoesBackWithinTheBound|CallsAtSteadyDemand)$' -v . |
				grep -E '^(=== RUN|--- |    lease_test)' | sed 's/^    lease_test.go:[0-9]*: /    /')
		} >"$RESULTS/lease-fleet.txt"
		{
			echo "# the simulation (TestSimulation ${long:-(its short version)} in bench/leasesim), on a fake clock against a model of the script"
			header "$g"
			echo
			(cd leasesim && go test -count=1 -run '^TestSimulation$' -v $long . | grep -E '^(=== RUN|--- |    sim_test)' | sed 's/^    sim_test.go:[0-9]*: /    /')
		} >"$RESULTS/lease-sim.txt"
		echo "run.sh: wrote $RESULTS/lease-fleet.txt and $RESULTS/lease-sim.txt" >&2
		;;
	pool)
		fleet=10s
		[ "$BENCHTIME" = 1x ] && fleet=1s
		{
			echo "# the etcdsem module's pool tests (ETCDSEM_POOL=$fleet go test -run TestPool -v), on an in-process etcd server"
			header "$g"
			echo
			(cd ../etcdsem && ETCDSEM_POOL=$fleet go test -count=1 -run '^TestPool' -v . |
				grep -E '^(=== RUN|--- |    pool_test)' | sed 's/^    pool_test.go:[0-9]*: /    /')
		} >"$RESULTS/pool-fleet.txt"
		echo "run.sh: wrote $RESULTS/pool-fleet.txt" >&2
		;;
	esac
done
