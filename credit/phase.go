package credit

// The accrual phase word.
//
// Credit accrues in the bucket's accounts (origin and minted, guarded by
// mu) only while the bucket is below its burst. The phase word says which
// of three states accrual is in, so that the lock-free spends can see at a
// glance whether they must restart it:
//
//	  63  62 ............................................. 0
//	+----+------------------------------------------------+
//	| R  |        restart time (ns since the epoch)        |
//	+----+------------------------------------------------+
//
//	accruing  the whole word is 0: credit accrues from origin, minted
//	full      the whole word is 1: the last mint filled the bucket, so
//	          nothing accrues until credit is next taken out of it
//	restart   R is set: credit was taken out of the full bucket at the
//	          time in the low bits; accrual starts again then, with no
//	          fraction carried, once a holder of mu applies it
//
// Invariants, with mu free:
//
//	P1  the bucket's limit is at its burst only while the phase is full:
//	    a mint that fills the bucket sets full before it lets go of mu
//	P2  full moves to restart only by compare-and-swap from full, which
//	    the first spend out of the full bucket does (or a holder of mu that
//	    finds the bucket no longer full), so at most one restart is
//	    recorded per fill, and the earliest wins
//	P3  only a holder of mu moves the phase to accruing or to full
type phase uint64

const (
	accruing phase = 0
	full     phase = 1

	restartBit phase = 1 << 63
)

// restartAt returns the restart phase for time now, in nanoseconds since
// the bucket's epoch; a time before the epoch (a clock that reads
// backwards) counts as the epoch itself.
func restartAt(now int64) phase { return restartBit | phase(max(now, 0)) }

// restarting reports whether p records a restart.
func (p phase) restarting() bool { return p&restartBit != 0 }

// at returns the time a restart phase records.
func (p phase) at() int64 { return int64(p &^ restartBit) }
