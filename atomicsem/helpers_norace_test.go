//go:build !race

package atomicsem_test

// raceEnabled reports whether the test binary is built with -race.
const raceEnabled = false
