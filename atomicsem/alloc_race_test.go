//go:build race

package atomicsem_test

// allocRaceBuild reports whether this is a -race build (see skipUnderRace).
const allocRaceBuild = true
