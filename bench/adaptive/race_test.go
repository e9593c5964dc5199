//go:build race

package adaptivebench_test

// raceBuild reports whether this is a -race build.
const raceBuild = true
