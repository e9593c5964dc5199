//go:build !race

package adaptiveotel_test

// raceEnabled reports whether the test binary is built with -race.
const raceEnabled = false
