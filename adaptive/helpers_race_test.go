//go:build race

package adaptive_test

// raceEnabled reports whether the test binary is built with -race.
const raceEnabled = true
