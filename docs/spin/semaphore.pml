/*
 * semaphore.pml: a Promela model of the atomicsem word protocol, FIFO mode.
 *
 * The model follows atomicsem/semaphore.go and atomicsem/dispatch.go step
 * by step (see README.md for the mapping). The packed state word is one
 * variable, read by a load and changed only by a separate compare-and-swap
 * step, so every interleaving between a load and its CAS is explored. The
 * wait queue and the waiters' status are plain variables guarded by the
 * modelled queue lock, as in the Go code. A parked waiter blocks on its own
 * one-slot channel, the auto-reset event.
 *
 * Ghost state (not in the Go code) records who holds which permits and which
 * operations are in flight, so that the monitor can state the invariants
 * (numbered as in internal/state):
 *
 *   I1  total <= max
 *   I2  held <= max (held >= 0: the field is unsigned, and I4)
 *   I3  eligible implies queued
 *   I4  held equals the permits granted and not yet returned
 *   I5  closed, once set, stays set
 *   I6  with the lock free, queued is set iff the queue is non-empty, and
 *       eligible iff a queued waiter asks for no more than total
 *   W   work conservation: when no operation is in flight, the first waiter
 *       that the limit admits does not fit in the free permits (no lost
 *       wake-up: nobody sleeps while permits that fit are free)
 *   F   FIFO: an arrival never takes permits while a waiter that the limit
 *       admits is queued and not yet granted (one above the limit may be
 *       passed: no release could serve it)
 *   I8  while the word shows eligible, only the holder of the lock changes
 *       it: checked at every lock-free CAS, and where a dispatch relies on
 *       it to skip its CAS
 *
 * At the end every client must hold nothing, the queue must be empty with
 * both queue flags clear, held == 0, and every event must be clear. A
 * client parked forever, or blocked on the lock, is an invalid end state.
 *
 * Variants, chosen with spin -D<NAME> -a semaphore.pml:
 *   WITH_CLOSE            the controller closes the semaphore instead of
 *                         moving its limit
 *   BUG_SKIP_WAKE         Release returns its permits with a plain CAS even
 *                         when the eligible flag is set (no hand-off)
 *   BUG_NO_CANCEL_NOTIFY  cancelling a waiting waiter does not dispatch
 *   BUG_LOSE_ON_CANCEL    a grant that raced a cancellation is dropped
 *   BUG_NO_WAIT_FOR_WAKE  a cancellation that finds its waiter granted but
 *                         not yet woken passes the permits on without
 *                         waiting for the wake-up, which then lands late
 *   BUG_NONATOMIC         the CAS compares and stores in two steps
 *   BUG_NO_SKIP           dispatch stops at a waiter above the limit
 *   BUG_OVERTAKE          the fast path ignores the eligible flag
 *   BUG_DROP_CLOSED       Release's Word.WithHeld loses the closed flag
 *                         (use with WITH_CLOSE)
 *   BUG_ELIGIBLE_NOT_SET  queueing a waiter that fits under the limit sets
 *                         only the queued flag
 *   BUG_ELIGIBLE_IS_QUEUED  dispatch sets eligible whenever a waiter
 *                         remains, counting those above the limit (the old
 *                         single waiters flag)
 *   BUG_LIMIT_LOCKFREE    a limit change is always a lock-free CAS, and
 *                         nobody serves the queue after it
 *   BUG_LIMIT_DISPATCH_AFTER  a limit change is always a lock-free CAS, and
 *                         the queue is served after it if queued was set
 *                         (the protocol before the eligible flag)
 *   BUG_LIMIT_CHECKS_ELIGIBLE  a limit change takes the lock only when
 *                         eligible is set, not whenever queued is
 * Every BUG_ variant must make pan report an error; scripts/spin.sh checks.
 * NO_I6 turns off the flag invariant I6, to show that a control that
 * breaks it also breaks W or F: a waiter left asleep or overtaken; NO_I8
 * turns off I8 with it, for the controls that write the word lock-free.
 *
 * Reachability probes, which must fail too, show that the clean runs reach
 * the situations the invariants are about:
 *   REACH_DEBT            the count goes negative (limit lowered below held)
 *   REACH_SKIP            dispatch grants a waiter behind one above the limit
 *   REACH_GRANT_CANCEL    a cancellation finds its waiter already granted
 *   REACH_WAKE_AFTER_UNLOCK  a cancellation finds its waiter granted by a
 *                         release that has unlocked and not yet woken it
 *   REACH_CLOSE_PARKED    Close finds parked waiters (use with WITH_CLOSE)
 *   REACH_QUEUED_NOT_ELIGIBLE  with the lock free, queued is set and
 *                         eligible clear (every queued waiter is above the
 *                         limit)
 *   REACH_PASS_OVERSIZED  an arrival takes permits while a waiter is parked
 *                         (by F, one above the limit)
 *   REACH_LIMIT_GRANTS    a limit change, served under the lock, grants a
 *                         waiter in its CAS
 *   REACH_SKIP_CAS        a dispatch skips its CAS (a hand-off of exactly
 *                         what came back)
 */

#define NC 3            /* clients; the monitor's macros are written for 3 */
#ifndef MAXP
#define MAXP 3          /* the semaphore's max */
#endif
#ifndef INIT
#define INIT 2          /* initial limit: total = count = INIT, held 0 */
#endif
#ifndef WANT0
#define WANT0 2         /* client 0's request; 1 makes every request 1 */
#endif
#ifndef CLIENT1_ROUNDS
#define CLIENT1_ROUNDS 1  /* 2: client 1 acquires twice, reusing its event */
#endif

/* Word layout, as in internal/state with 3-bit fields: held in bits 0-2,
 * total in 3-5, max in 6-8, queued in bit 9, eligible in bit 10, closed in
 * bit 11. The count is derived: total - held, negative in debt. */
#define TSHIFT  3
#define MSHIFT  6
#define QBIT    512
#define EBIT    1024
#define CBIT    2048

#define HELD(w)     ((w) & 7)
#define TOTAL(w)    (((w) >> TSHIFT) & 7)
#define MAXF(w)     (((w) >> MSHIFT) & 7)
#define COUNT(w)    (TOTAL(w) - HELD(w))
#define QUEUED(w)   (((w) & QBIT) != 0)
#define ELIGIBLE(w) (((w) & EBIT) != 0)
#define CLOSED(w)   (((w) & CBIT) != 0)
#define WORD(h, t, m)        ((h) | ((t) << TSHIFT) | ((m) << MSHIFT))
#define WITHHELD(w, h)       (((w) & ~7) | (h))
#define WITHTOTAL(w, t, h)   (((w) & ~63) | (h) | ((t) << TSHIFT))
/* Word.WithQueue: eligible only with queued */
#define WITHQUEUE(w, qd, el) \
	(((w) & ~(QBIT | EBIT)) | ((qd) -> QBIT : 0) | (((qd) && (el)) -> EBIT : 0))

/* waiter status, as in atomicsem/waiter.go */
#define WAITING   0
#define GRANTED   1
#define CLOSEDST  2

/* the transitions that serveLocked and the lock-free paths apply */
#define RELEASE     0   /* Word.Release: a token returns n permits */
#define FORGET      1   /* Word.Forget: a token retires n permits */
#define TRYRELEASE  2   /* Word.TryRelease(n) */
#define SETLIMIT    3   /* Word.SetLimit(n) */

#define NOBODY  NC      /* ghost slot for CASes that move no permits */

short word = WORD(0, INIT, MAXP);

bit  mu;                /* the queue lock */
byte q[NC];             /* FIFO wait queue of client ids; guarded by mu */
byte qlen;              /* guarded by mu */
byte wn[NC];            /* each client's request */
byte status[NC];        /* guarded by mu */
chan ev[NC] = [1] of { bit };   /* auto-reset events */

/* ghost state */
byte held[NC + 1];      /* permits granted to each client, not yet returned */
byte busy;              /* operations in flight (a parked waiter is not) */
bit  closedSeen;        /* Close has succeeded */
byte finished;          /* processes done */

#define SUMHELD     (held[0] + held[1] + held[2])
#define ADMITS(w, i)   (wn[q[i]] <= TOTAL(w))
/* ANYADMITS: some queued waiter asks for no more than the limit, which is
 * what the eligible flag must say (wantIndex.smallest(queue) <= total) */
#define ANYADMITS(w) \
	((qlen > 0 && ADMITS(w, 0)) || (qlen > 1 && ADMITS(w, 1)) || (qlen > 2 && ADMITS(w, 2)))
/* WAITS: a queued waiter that the limit admits and that no dispatch has
 * granted yet (a granted one stays queued until the wake-up step) */
#define WAITS(w, i) (ADMITS(w, i) && held[q[i]] == 0)
#define BLOCKS(w)   ((qlen > 0 && WAITS(w, 0)) || (qlen > 1 && WAITS(w, 1)) || (qlen > 2 && WAITS(w, 2)))
/* PARKED: some queued waiter is not granted yet, whatever it asks for */
#define PARKED      ((qlen > 0 && held[q[0]] == 0) || (qlen > 1 && held[q[1]] == 0) || (qlen > 2 && held[q[2]] == 0))
#define FITQ(i)     (wn[q[i]] <= COUNT(word))
#define SERVABLE \
	((qlen > 0 && ADMITS(word, 0) && FITQ(0)) || \
	 (qlen > 1 && !ADMITS(word, 0) && ADMITS(word, 1) && FITQ(1)) || \
	 (qlen > 2 && !ADMITS(word, 0) && !ADMITS(word, 1) && ADMITS(word, 2) && FITQ(2)))

#define I1  (TOTAL(word) <= MAXF(word))
#define I2  (HELD(word) <= MAXF(word))
#define I3  (!ELIGIBLE(word) || QUEUED(word))
#define I4  (HELD(word) == SUMHELD)
#define I5  (!closedSeen || CLOSED(word))
#ifdef NO_I6
#define I6  1           /* to see what a control breaks besides the flags */
#else
#define I6  (mu || (QUEUED(word) == (qlen > 0) && ELIGIBLE(word) == ANYADMITS(word)))
#endif
#define W   (busy > 0 || CLOSED(word) || !SERVABLE)
#if defined(REACH_DEBT)
#define PROBE (COUNT(word) >= 0)
#elif defined(REACH_QUEUED_NOT_ELIGIBLE)
#define PROBE (mu || !QUEUED(word) || ELIGIBLE(word))
#else
#define PROBE 1
#endif
#define INV (I1 && I2 && I3 && I4 && I5 && I6 && W && PROBE)

/* Names for pan's report: each assertion starts with one of these hidden
 * bytes, always 0 and not part of the state, so that a violation reads
 * "assertion violated (W_no_lost_wakeup||...". */
hidden byte I1_total_le_max, I2_held_le_max, I3_eligible_implies_queued;
hidden byte I4_held_matches_tokens, I5_closed_stays, I6_queue_flags;
hidden byte W_no_lost_wakeup, F_fifo, I8_only_lock_writes, PROBE_reached;

active proctype monitor()
{
end:
	atomic {
		!INV ->
		assert(I1_total_le_max || I1);
		assert(I2_held_le_max || I2);
		assert(I3_eligible_implies_queued || I3);
		assert(I4_held_matches_tokens || I4);
		assert(I5_closed_stays || I5);
		assert(I6_queue_flags || I6);
		assert(W_no_lost_wakeup || W);
		assert(PROBE_reached || PROBE)
	}
}

/* The lock is taken in one step with the first load of the word under it,
 * as atomic { mu == 0 -> mu = 1; ... }. That loses no state: a run in which
 * the word changes between taking the lock and the load ends where a run
 * that takes the lock after the change does, and that run is explored. */
inline unlock() { mu = 0 }

/* cas(old, nw, g, gv, arrive, lockfree): Semaphore.cas. On success the
 * ghost slot g is set to gv in the same step. An arrival (an acquire not
 * served by dispatch) also checks F against the word it replaced, and a
 * caller that does not hold mu checks I8: it never replaces a word that
 * shows eligible. */
inline cas(old, nw, g, gv, arrive, lockfree)
{
#ifdef BUG_NONATOMIC
	if
	:: word == old -> ok = true
	:: else -> ok = false
	fi;
	if
	:: ok -> atomic { word = nw; held[g] = gv }
	:: else
	fi
#else
	atomic {
		if
		:: word == old ->
			assert(F_fifo || !arrive || !BLOCKS(old));
#ifndef NO_I8
			assert(I8_only_lock_writes || !lockfree || !ELIGIBLE(old));
#endif
#ifdef REACH_PASS_OVERSIZED
			assert(PROBE_reached || !arrive || !PARKED);
#endif
			word = nw; held[g] = gv; ok = true
		:: else -> ok = false
		fi
	}
#endif
}

inline setEvent(c)  { if :: nfull(ev[c]) -> ev[c]!1 :: full(ev[c]) fi }
inline tryWait(c)   { if :: nempty(ev[c]) -> ev[c]?_ :: empty(ev[c]) fi }

/* qRemoveAt(k): waitQueue.remove of the waiter at index k. Requires mu. */
inline qRemoveAt(k)
{
	j = k;
	do
	:: j + 1 < qlen -> q[j] = q[j + 1]; j++
	:: else -> break
	od;
	qlen--; q[qlen] = 0; j = 0
}

/* change(kind, c, n): old is the loaded word; sets base to the word the
 * transition returns and fits to whether it accepts old. A token's Release
 * and Forget return permits that client c holds (c is NOBODY for none):
 *   RELEASE     held - n
 *   FORGET      held - n, total max(total - n, 0)
 *   TRYRELEASE  total + n, refused when closed or above max
 *   SETLIMIT    total n, refused when closed
 * Written as one expression per field so that each use of it is small. */
inline change(kind, c, n)
{
	assert(kind > FORGET || (n <= HELD(old) && (c == NOBODY || held[c] == n)));
	fits = (kind <= FORGET || !CLOSED(old) && (kind == SETLIMIT || TOTAL(old) + n <= MAXF(old)));
	base = WITHTOTAL(old,
		(kind == RELEASE -> TOTAL(old) :
		 (kind == FORGET -> (TOTAL(old) > n -> TOTAL(old) - n : 0) :
		  (kind == TRYRELEASE -> TOTAL(old) + n : n))),
		(kind <= FORGET -> HELD(old) - n : HELD(old)));
#ifdef BUG_DROP_CLOSED
	/* Word.WithHeld loses the closed flag */
	if :: kind == RELEASE -> base = base & ~CBIT :: else fi
#endif
	skip
}

/* removeLocked(c): take client c off the queue. The queue flags may then
 * say more than is true (the queue may be empty, or hold only waiters
 * above the limit); the caller, cancel, serves the queue next, and that
 * CAS brings them up to date. Requires mu. */
inline removeLocked(c)
{
	d_step {
		i = 0;
		do
		:: q[i] == c -> break
		:: else -> i++
		od;
		qRemoveAt(i);
		i = 0
	}
}

/* serveLoad(kind, c, n): the deciding half of serveLocked. Load the word,
 * apply the transition (base; idle if it refuses), walk the queue as base
 * allows (walkLocked) and build the word to install (settle). A waiter above
 * the limit is passed over; the first other waiter that does not fit stops
 * the walk, and then eligible stays set. mask marks the queue positions
 * served, k counts them, and idle says that there is nothing to do. Requires
 * mu. */
inline serveLoad(kind, c, n)
{
	old = word;
	change(kind, c, n);
	if
	:: !fits -> idle = true     /* refused: serveLocked returns false */
	:: fits ->
		free = COUNT(base); gr = 0; mask = 0; k = 0; stopped = false;
		if
		:: CLOSED(base)     /* Close has failed everyone queued */
		:: else ->
			j = 0;
			do
			:: j < qlen && wn[q[j]] > TOTAL(base) ->
#ifdef BUG_NO_SKIP
				stopped = true; break
#else
				j++
#endif
			:: j < qlen && wn[q[j]] <= TOTAL(base) && free < wn[q[j]] ->
				stopped = true; break
			:: j < qlen && wn[q[j]] <= TOTAL(base) && free >= wn[q[j]] ->
#ifdef REACH_SKIP
				assert(PROBE_reached || j == 0 || k > 0);
#endif
				free = free - wn[q[j]]; gr = gr + wn[q[j]];
				mask = mask | (1 << j); k++; j++
			:: else -> break
			od;
			j = 0
		fi;
#ifdef REACH_LIMIT_GRANTS
		assert(PROBE_reached || kind == RELEASE || k == 0);
#endif
#ifdef BUG_ELIGIBLE_IS_QUEUED
		stopped = (k < qlen);
#endif
		nw = WITHQUEUE(WITHHELD(base, HELD(base) + gr), k < qlen, stopped);
		idle = (k == 0 && nw == old)
	fi;
	base = 0; free = 0; gr = 0; stopped = false; fits = false
}

/* casServe: serveLocked's CAS. On success the permits that c returns leave
 * it and the served waiters hold theirs, in the same step (ghost). */
inline grantGhost(c)
{
	held[c] = 0;
	j = 0;
	do
	:: j < qlen -> if :: mask & (1 << j) -> held[q[j]] = wn[q[j]] :: else fi; j++
	:: else -> break
	od;
	j = 0
}

inline casServe(c)
{
#ifdef BUG_NONATOMIC
	if
	:: word == old -> ok = true
	:: else -> ok = false
	fi;
	if
	:: ok -> atomic { word = nw; grantGhost(c) }
	:: else
	fi
#else
	atomic {
		if
		:: word == old -> word = nw; grantGhost(c); ok = true
		:: else -> ok = false
		fi
	}
#endif
}

/* wakeServed: walkLocked with wake set: take the served waiters off the
 * queue, mark them granted and set their events. Requires mu. A token's
 * release whose dispatch writes nothing (canDefer) may instead leave one
 * waiter's event for serve to set after unlocking mu, as handBack does for
 * the front hand-off (handOffFrontLocked); the choice is left open, so the
 * runs cover both ways. */
inline wakeServed()
{
	j = qlen;
	do
	:: j > 0 ->
		j--;
		if
		:: mask & (1 << j) ->
			w = q[j]; i = j; qRemoveAt(i); j = i;
			status[w] = GRANTED;
			if
			:: canDefer && pend == NOBODY -> pend = w
			:: true -> setEvent(w)
			fi
		:: else
		fi
	:: else -> break
	od;
	i = 0; j = 0; w = 0; mask = 0; k = 0
}

/* serveRest: serveLocked after its first load (commitLocked): CAS, and on
 * failure decide again from a fresh load; wake the served waiters only after
 * the CAS succeeds. A dispatch that leaves the word as it was, while the
 * word shows eligible, skips the CAS: no lock-free writer may change such a
 * word (I8), so it must still be old, and the grant takes effect there, in
 * the step that wakes the waiters. Requires mu. */
inline serveRest(kind, c, n)
{
	do
	:: idle -> break
	:: !idle && nw == old && ELIGIBLE(old) ->
#ifdef REACH_SKIP_CAS
		assert(PROBE_reached);
#endif
		atomic {
#ifndef NO_I8
			assert(I8_only_lock_writes || word == old);
#endif
			grantGhost(c); canDefer = deferOK; wakeServed(); canDefer = false
		};
		break
	:: !idle && !(nw == old && ELIGIBLE(old)) ->
		casServe(c);
		if
		:: ok -> atomic { wakeServed() }; break
		:: else -> atomic { serveLoad(kind, c, n) }
		fi
	od;
	atomic { idle = false; mask = 0; k = 0; old = 0; nw = 0; ok = false }
}

/* serveLocked(kind, c, n): apply the transition and serve the queue with
 * the permits and the limit that result, in one CAS. Requires mu. */
inline serveLocked(kind, c, n)
{
	atomic { serveLoad(kind, c, n) };
	serveRest(kind, c, n)
}

/* serve(kind, c, n): take mu and serveLocked; ends the caller's operation.
 * A token's release (handBack) may wake the waiter it handed its permits to
 * after unlocking mu, in a step of its own: the operation is in flight
 * until then. */
inline serve(kind, c, n)
{
	atomic { mu == 0 -> mu = 1; serveLoad(kind, c, n); deferOK = (kind == RELEASE) };
	serveRest(kind, c, n);
	atomic {
		unlock(); deferOK = false;
		if
		:: pend == NOBODY -> busy--
		:: else
		fi
	};
	if
	:: pend != NOBODY -> atomic { setEvent(pend); pend = NOBODY; busy-- }
	:: else
	fi
}

/* Which word sends a change through serve rather than a lock-free CAS:
 * owner.ReturnPermits hands off when eligible is set (a queued waiter fits
 * under the limit); changeLimit serves whenever queued is set, since the
 * new limit decides which waiters are eligible. */
#ifdef BUG_SKIP_WAKE
#define HANDOFF(w)  0
#else
#define HANDOFF(w)  ELIGIBLE(w)
#endif
#if defined(BUG_LIMIT_LOCKFREE) || defined(BUG_LIMIT_DISPATCH_AFTER)
#define LIMITLOCK(w)  0
#elif defined(BUG_LIMIT_CHECKS_ELIGIBLE)
#define LIMITLOCK(w)  ELIGIBLE(w)
#else
#define LIMITLOCK(w)  QUEUED(w)
#endif
#define SERVES(kind, w)  ((kind) == RELEASE -> HANDOFF(w) : LIMITLOCK(w))

/* changeLoad(kind, c, n): load, apply the transition; nw is the word a
 * lock-free CAS installs. */
inline changeLoad(kind, c, n)
{
	old = word; change(kind, c, n); nw = base; base = 0
}

/* update(kind, c, n): owner.ReturnPermits (kind RELEASE) and changeLimit
 * (FORGET for owner.ForgetPermits, TRYRELEASE, SETLIMIT), which share one
 * shape: load and apply the transition; if it refuses, return; if the word
 * asks for it, serve under mu; otherwise a plain CAS, retried on failure,
 * with no dispatch after it. */
inline update(kind, c, n)
{
	atomic { busy++; changeLoad(kind, c, n) };
	updateRest(kind, c, n)
}

/* updateRest: update after its first load. */
inline updateRest(kind, c, n)
{
	do
	:: !fits -> atomic { busy--; old = 0; nw = 0 }; break
	:: fits && SERVES(kind, old) ->
		atomic { fits = false; old = 0; nw = 0 };
		serve(kind, c, n); break
	:: fits && !SERVES(kind, old) ->
		cas(old, nw, c, 0, false, true);
		if
		:: ok ->
#ifdef BUG_LIMIT_DISPATCH_AFTER
			/* the old dispatchIfWaiters: serve after the change */
			if
			:: kind != RELEASE && QUEUED(old) ->
				atomic { fits = false; old = 0; nw = 0; ok = false };
				serve(RELEASE, NOBODY, 0); break
			:: else
			fi;
#endif
			atomic { busy--; fits = false; old = 0; nw = 0; ok = false }; break
		:: else -> atomic { changeLoad(kind, c, n) }
		fi
	od
}

/* Semaphore.Close: the closed flag is set and the queue flags cleared in one
 * CAS, then every queued waiter is told, under mu. */
inline close()
{
	atomic { mu == 0 -> mu = 1; busy++; old = word }
	do
	:: CLOSED(old) -> break
	:: !CLOSED(old) ->
		atomic {
			if
			:: word == old ->
				word = (old | CBIT) & ~(QBIT | EBIT); closedSeen = 1; ok = true
			:: else -> ok = false
			fi
		}
		if
		:: ok ->
#ifdef REACH_CLOSE_PARKED
			assert(PROBE_reached || qlen == 0);
#endif
			d_step {
				do
				:: qlen > 0 ->
					w = q[0]; qRemoveAt(0);
					status[w] = CLOSEDST; setEvent(w)
				:: else -> break
				od;
				w = 0
			}
			break
		:: else -> old = word
		fi
	od;
	atomic { unlock(); busy--; old = 0; ok = 0 }
}

/* takeLoad(n): takeOrQueueLocked's load and decision. fits is
 * mayTakeLocked: n permits are free and eligible is clear (exact under mu);
 * nw is the word with the queue flags set for queueing: queued, and
 * eligible if it was or if n is within the limit. Requires mu. */
inline takeLoad(n)
{
	old = word;
	fits = COUNT(old) >= n && !ELIGIBLE(old);
#ifdef BUG_ELIGIBLE_NOT_SET
	nw = old | QBIT
#else
	nw = WITHQUEUE(old, true, ELIGIBLE(old) || n <= TOTAL(old))
#endif
}

/* fastLoad(n): the fast path's test: neither closed nor eligible blocks an
 * arrival and n permits are free. */
inline fastLoad(n)
{
	old = word;
#ifdef BUG_OVERTAKE
	fits = !CLOSED(old) && COUNT(old) >= n
#else
	fits = (old & (EBIT | CBIT)) == 0 && COUNT(old) >= n
#endif
}

/* A client acquires n permits (rounds times), then releases them, or, if
 * canForget, may forget them and add them back with TryRelease. If
 * canCancel, its context may be cancelled at any moment while it is parked. */
proctype client(byte me; byte n; bit canCancel; bit canForget; byte rounds)
{
	short old, nw, base, free, gr;
	bool ok, fits, idle, stopped, canDefer, deferOK;
	byte pend = NOBODY;
	byte i, j, k, w, mask, kind, back;

again:
	/* Acquire's fast path: retry the CAS while the test still holds */
	atomic { busy++; fastLoad(n) }
	do
	:: fits ->
		cas(old, WITHHELD(old, HELD(old) + n), me, n, true, true);
		if
		:: ok -> atomic { busy--; old = 0; fits = 0; ok = 0; goto holding }
		:: else -> atomic { fastLoad(n) }
		fi
	:: !fits -> break
	od;

	/* acquireSlow: takeOrQueueLocked(n, nil); the lock is taken in the
	 * step of the first load */
	atomic { mu == 0 -> mu = 1; takeLoad(n) }
	do
	:: CLOSED(old) -> atomic { unlock(); busy--; old = 0; nw = 0; fits = 0; goto failed }
	:: !CLOSED(old) && fits ->
		cas(old, WITHHELD(old, HELD(old) + n), me, n, true, false);
		if
		:: ok -> atomic { unlock(); busy--; old = 0; nw = 0; fits = 0; ok = 0; goto holding }
		:: else -> atomic { takeLoad(n) }
		fi
	:: !CLOSED(old) && !fits ->
		/* set the flags before queueing, under mu */
		if
		:: nw == old -> ok = true
		:: else -> cas(old, nw, NOBODY, 0, false, false)
		fi;
		if
		:: ok -> break
		:: else -> atomic { takeLoad(n) }
		fi
	od;
	atomic {
		status[me] = WAITING; q[qlen] = me; qlen++;
		unlock(); busy--; old = 0; nw = 0; ok = 0; fits = 0
	}

	/* park: the event, or the context (cancel takes the lock first) */
	if
	:: ev[me]?_ ->
		if
		:: status[me] == GRANTED -> goto holding
		:: status[me] == CLOSEDST -> goto failed
		:: else -> assert(false)    /* woken without a decision */
		fi
	:: atomic { canCancel && mu == 0 -> mu = 1; busy++ }
	fi;

	/* cancel */
	if
	:: status[me] == WAITING ->
		removeLocked(me)
#ifdef BUG_NO_CANCEL_NOTIFY
		; atomic { unlock(); busy--; goto failed }
#endif
	:: status[me] == GRANTED ->
		/* the grant raced the cancellation: pass the permits on */
#ifdef REACH_GRANT_CANCEL
		assert(PROBE_reached);
#endif
#ifdef BUG_LOSE_ON_CANCEL
		atomic { tryWait(me); unlock(); busy--; goto failed }
#endif
		/* consume the wake-up: a release that handed the permits over
		 * after unlocking may not have sent it yet, and then the waiter
		 * waits for it without the lock */
#ifdef BUG_NO_WAIT_FOR_WAKE
		atomic { tryWait(me); back = n }
#else
		if
		:: atomic { nempty(ev[me]) -> ev[me]?_; back = n }
		:: atomic {
			empty(ev[me]) ->
#ifdef REACH_WAKE_AFTER_UNLOCK
			assert(PROBE_reached);
#endif
			unlock()
		   };
		   ev[me]?_;
		   atomic { mu == 0 -> mu = 1; back = n }
		fi
#endif
		/* return the permits and serve the queue with them in one CAS */
	:: status[me] == CLOSEDST ->
		tryWait(me);
		atomic { unlock(); busy--; goto failed }
	fi;
	/* serveLocked(Release, n) for a grant, or dispatchLocked (back == 0):
	 * removing w may let the waiters behind it fit, and the flags must
	 * stop counting it */
	serveLocked(RELEASE, me, back);
	atomic { unlock(); busy--; back = 0; goto failed };

holding:
	/* Token.Release, or Token.Forget and then TryRelease to add the
	 * permits back (one update site for both ends, to keep pan small) */
	atomic {
		if
		:: kind = RELEASE
		:: canForget -> kind = FORGET
		fi;
		busy++; changeLoad(kind, me, n)
	}
	updateRest(kind, me, n);
	if
	:: kind == FORGET ->
		atomic { kind = RELEASE; busy++; changeLoad(TRYRELEASE, NOBODY, n) };
		updateRest(TRYRELEASE, NOBODY, n)
	:: else
	fi;

failed:
	atomic {
		/* the free list's precondition, and no permits left behind */
		assert(held[me] == 0 && len(ev[me]) == 0);
		if
		:: rounds > 1 -> rounds--; goto again
		:: else -> finished++
		fi
	}
}

/* The controller moves the limit down (into debt if tokens hold more) or
 * up, then restores it to max so that every client can finish. With
 * WITH_CLOSE it closes the semaphore instead, at any moment. */
proctype controller()
{
	short old, nw, base, free, gr;
	bool ok, fits, idle, stopped, canDefer, deferOK;
	byte pend = NOBODY;
	byte i, j, k, w, mask, kind, l;

#ifdef WITH_CLOSE
	close();
#else
	atomic {
		if
		:: kind = SETLIMIT; l = 0
		:: kind = SETLIMIT; l = 1
		:: kind = TRYRELEASE; l = 1
		fi;
		busy++; changeLoad(kind, NOBODY, l)
	}
	updateRest(kind, NOBODY, l);
	atomic { kind = 0; l = 0; busy++; changeLoad(SETLIMIT, NOBODY, MAXP) };
	updateRest(SETLIMIT, NOBODY, MAXP);
#endif
	finished++
}

init
{
	atomic {
		wn[0] = WANT0; wn[1] = 1; wn[2] = 1;
		run client(0, WANT0, 1, 0, 1);
		run client(1, 1, 1, 1, CLIENT1_ROUNDS);
		run client(2, 1, 0, 0, 1);
		run controller()
	}
	finished == NC + 1;
	assert(qlen == 0 && !QUEUED(word) && !ELIGIBLE(word) && mu == 0 && busy == 0);
	assert(HELD(word) == 0 && SUMHELD == 0);
	assert(len(ev[0]) == 0 && len(ev[1]) == 0 && len(ev[2]) == 0);
#ifndef WITH_CLOSE
	assert(TOTAL(word) == MAXP)
#endif
}
