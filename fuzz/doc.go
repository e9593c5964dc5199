// Package fuzz holds the correctness harness that checks the semaphore
// against the sequential reference model in internal/model. It has no
// non-test code.
//
// Fuzz targets (each also runs its committed seed corpus under plain
// go test):
//
//   - FuzzTransitions applies the pure transitions of internal/state to
//     arbitrary valid words and checks invariants, field arithmetic, flag
//     preservation and agreement with the model.
//   - FuzzSemaphoreOps drives one real Semaphore and the model with the same
//     single-goroutine operation sequence and compares every result and
//     every Stats snapshot, in FIFO and barging modes.
//   - FuzzAutoReset drives event.AutoReset against a one-flag model.
//
// The linearizability tests record concurrent histories on a real
// Semaphore and check them with porcupine against the model. Built with
// -tags atomicsem_hooks they also yield at the semaphore's hook sites to
// widen the interleavings. Flags: -lin.small=N sets the number of small
// histories per mode (1000 by default), -lin.long adds histories of 8
// goroutines × 1000 operations, -lin.seed=S makes S the seed of the first
// history, and LIN_VIZ_DIR chooses where porcupine's visualization of a
// failing history is written (the system's temporary directory otherwise).
// A seed fixes each goroutine's operations, not the schedule, so a replay
// may pass. Races whose window is a few instructions wide, such as a store
// that should have been a compare-and-swap, show up in the hooks build only.
//
// Typical runs:
//
//	go test -race ./fuzz/
//	go test -tags atomicsem_hooks -race ./fuzz/
//	go test ./fuzz/ -run '^$' -fuzz '^FuzzSemaphoreOps$' -fuzztime 60s
package fuzz
