//go:build !race

package overloadbench_test

// raceEnabled reports whether the test binary is built with -race.
const raceEnabled = false
