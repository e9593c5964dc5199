//go:build race

package group_test

// raceEnabled reports whether this is a -race build.
const raceEnabled = true
