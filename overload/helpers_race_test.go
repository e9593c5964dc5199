//go:build race

package overload_test

// raceEnabled reports whether the test binary is built with -race.
const raceEnabled = true
