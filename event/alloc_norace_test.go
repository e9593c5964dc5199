//go:build !race

package event_test

// raceBuild reports whether this is a -race build (see skipUnderRace).
const raceBuild = false
