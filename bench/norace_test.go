//go:build !race

package bench_test

// raceBuild reports whether this is a -race build.
const raceBuild = false
