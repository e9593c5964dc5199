#!/usr/bin/env bash
# installcheck.sh builds and vets each nested module (every */go.mod) the
# way go get would fetch it for a user: without its replace directive,
# against the core module served from a local file module proxy, and every
# other dependency from the usual proxy or the module cache. A nested
# module that needs an API its required core version lacks, or requires a
# version that cannot be made, fails here rather than for a user.
#
# The core is served at each version a nested module requires: from the
# tag of that name if the repository has it (a released core), else from
# $CORE_REV if set (a commit), else from the tree as it is (tracked and
# untracked files that git does not ignore: the version about to be
# tagged). scripts/modproxy makes the proxy's files with the go command's
# zip rules, so nested modules are left out of the core's zip.
#
# The go command keeps what a proxy served in the module cache, so the
# script removes the core at those versions from it before the check and
# again afterwards: no later build sees a version made from a working tree.
# The go command also keeps an index of each module version's files in the
# build cache, trusting a version never to change; GODEBUG=goindex=0 turns
# it off for the check, which serves one version from changing trees.
#
# Usage: scripts/installcheck.sh            Environment: CORE_REV.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$(mktemp -d)
modcache=$(go env GOMODCACHE)

modpath() { awk '$1 == "module" { print $2; exit }' "$1/go.mod"; }
core=$(modpath .)

nested=() versions=()
for f in */go.mod; do
	[[ -f $f ]] || continue
	m=${f%/go.mod}
	[[ $m == bench ]] || nested+=("$m")
	v=$(cd "$m" && go mod edit -json | awk -v p="\"$core\"," '$1 == "\"Path\":" && $2 == p { getline; gsub(/[",]/, ""); print $2; exit }')
	[[ -n $v && " ${versions[*]} " != *" $v "* ]] && versions+=("$v")
done

# The benchmark module, which no user installs, goes last: it measures the
# other nested modules through replace lines of its own, which stay, so
# that it builds against their copies here (each without its own replace)
# and the core from the proxy.
[[ -f bench/go.mod ]] && nested+=(bench)

# purge removes the core at the served versions from the module cache
# (whose files are read-only).
purge() {
	local v
	for v in "${versions[@]}"; do
		if [[ -d $modcache/$core@$v ]]; then
			chmod -R u+w "$modcache/$core@$v"
			rm -rf "$modcache/$core@$v"
		fi
		rm -f "$modcache/cache/download/$core/@v/$v".*
	done
}
trap 'purge; rm -rf "$work"' EXIT
purge

(cd scripts/modproxy && go build -o "$work/modproxy" .)
for v in "${versions[@]}"; do
	tree=$work/core/$v
	mkdir -p "$tree"
	rev=${CORE_REV:-}
	if git rev-parse -q --verify "refs/tags/$v" >/dev/null; then
		rev=$v
	fi
	if [[ -n $rev ]]; then
		echo "installcheck: serving $core@$v from $rev"
		git archive "$rev" | tar -C "$tree" -xf -
	else
		echo "installcheck: serving $core@$v from the tree"
		git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -C "$tree" -xf -
	fi
	"$work/modproxy" build -o "$work/proxy" -version "$v" -time "$(git log -1 --format=%cI)" "$tree"
done

fail=0
for m in "${nested[@]}"; do
	git ls-files -z --cached --others --exclude-standard -- "$m" | tar --null -T - -cf - | tar -C "$work" -xf -
	if [[ $m == bench ]]; then
		(cd "$work/$m" && go mod edit -dropreplace="$core")
		echo "installcheck: $m, without its replace of the core"
	else
		"$work/modproxy" dropreplace "$work/$m/go.mod"
		echo "installcheck: $m, without its replace"
	fi
	if ! (cd "$work/$m" && env GOWORK=off GOFLAGS="$(go env GOFLAGS) -mod=mod" \
		GOPROXY="file://$work/proxy,$(go env GOPROXY)" GONOSUMDB="$core" GODEBUG=goindex=0 \
		sh -c 'go build ./... && go vet ./...'); then
		echo "installcheck: $m does not build without its replace, against the core it requires"
		fail=1
	fi
done
exit $fail
