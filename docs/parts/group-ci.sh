# Mutation check for package group, for .ci/run (uses its step function).
# Each scripts/mutants/group-*.patch breaks one property of the package;
# applied to a copy of the tree, it must make the package's tests fail.
# About 15 s per patch on a 2-core machine (mostly the -race build).
step "mutants: package group"
survived=0
for p in scripts/mutants/group-*.patch; do
	copy=$(mktemp -d)
	git ls-files -z | xargs -0 tar -cf - | tar -xf - -C "$copy"
	patch -s -p1 -d "$copy" <"$p"
	if (cd "$copy" && go test -race -count=1 -timeout 120s ./group >/dev/null 2>&1); then
		echo "SURVIVED  $p"
		survived=1
	else
		echo "killed    $p"
	fi
	rm -rf "$copy"
done
[ "$survived" = 0 ]
