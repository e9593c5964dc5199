/*
 * semaphore.pml: a Promela model of the atomicsem word protocol, FIFO mode.
 *
 * The model follows atomicsem/acquire.go, release.go, dispatch.go, idle.go
 * and semaphore.go step by step (README.md maps each part). The packed state
 * word is one variable, read by a load and changed only by a separate
 * compare-and-swap step, so every interleaving between a load and its CAS is
 * explored. The maximum is a constant beside the word, as in the Go code.
 * The wait queue, the waiters' status and the list of WaitIdle callers are
 * plain variables guarded by the modelled queue lock. A parked waiter blocks
 * on its own one-slot channel, the auto-reset event; a parked WaitIdle
 * caller waits for its own channel to be closed.
 *
 * Ghost state (not in the Go code) records who holds which permits, which
 * operations are in flight and whether held was zero during a WaitIdle call,
 * so that the monitor can state the invariants (numbered as in
 * internal/state):
 *
 *   I1  limit <= max
 *   I2  held <= max (held >= 0: the field is unsigned, and I4)
 *   I3  eligible implies queued: holds by the encoding, the queue state
 *       being one 2-bit field
 *   I4  held equals the permits granted and not yet returned
 *   I5  closed, once set, stays set
 *   I6  with the lock free, the queue state is queued or higher iff the
 *       queue is non-empty, eligible iff a queued waiter asks for no more
 *       than the limit, and idle is set iff a WaitIdle caller waits
 *   I7  the queue state is never starving (FIFO mode)
 *   I8  while the word shows eligible, only the holder of the lock changes
 *       it: checked at every lock-free CAS, and where a dispatch relies on
 *       it to skip its CAS
 *   I9  with the lock free, idle is never set while held is zero
 *   W   work conservation: when no operation is in flight, the first waiter
 *       that the limit admits does not fit in the free permits (no lost
 *       wake-up: nobody sleeps while permits that fit are free)
 *   WI  no lost idle wake-up: when no operation is in flight, a parked
 *       WaitIdle caller sees permits held
 *   Z   a WaitIdle call that returns nil after parking saw held == 0 at
 *       some moment during the call
 *   F   FIFO: an arrival never takes permits while a waiter that the limit
 *       admits is queued and not yet granted (one above the limit may be
 *       passed: no release could serve it)
 *
 * At the end every client must hold nothing, the queue must be empty with
 * the queue state empty and the idle flag clear, held == 0, and every event
 * must be clear. A client or a WaitIdle caller parked forever, or blocked
 * on the lock, is an invalid end state.
 *
 * Variants, chosen with spin -D<NAME> -a semaphore.pml:
 *   WITH_CLOSE            the controller closes the semaphore instead of
 *                         moving its limit
 *   CLIENT2_ACQUIRES      client 2 only acquires (never calls WaitIdle)
 *   CLIENT2_WAITS_IDLE    client 2 only calls WaitIdle
 *   BUG_SKIP_WAKE         releaseFast returns the permits with a plain CAS
 *                         even when the word shows eligible (no hand-off)
 *   BUG_NO_CANCEL_NOTIFY  cancelling a waiting waiter does not serve the
 *                         queue
 *   BUG_LOSE_ON_CANCEL    a grant that raced a cancellation is dropped
 *   BUG_NO_WAIT_FOR_WAKE  a cancellation that finds its waiter granted but
 *                         not yet woken passes the permits on without
 *                         waiting for the wake-up, which then lands late
 *   BUG_WOKE_WAITS_AGAIN  a waiter that finds its ctx done after consuming
 *                         its wake-up withdraws as if the wake-up were still
 *                         to come, and waits for it
 *   BUG_NONATOMIC         the CAS compares and stores in two steps
 *   BUG_NO_SKIP           the walk stops at a waiter above the limit
 *   BUG_OVERTAKE          the fast path's block is the closed bit alone, so
 *                         it ignores the eligible state
 *   BUG_DROP_CLOSED       Release's Word.WithHeld loses the closed bit
 *                         (use with WITH_CLOSE)
 *   BUG_ELIGIBLE_NOT_SET  queueing a waiter that fits under the limit leaves
 *                         the queue state queued (eligible only if it was)
 *   BUG_ELIGIBLE_IS_QUEUED  settle makes the queue state eligible whenever
 *                         a waiter remains, counting those above the limit
 *                         (never queued)
 *   BUG_QUEUE_OR          takeOrQueueLocked ORs the new queue state into the
 *                         word instead of replacing the field, so a waiter
 *                         within the limit that queues behind waiters above
 *                         it turns queued into starving
 *   BUG_LIMIT_LOCKFREE    a limit change is always a lock-free CAS, and
 *                         nobody serves the queue after it
 *   BUG_LIMIT_DISPATCH_AFTER  a limit change is always a lock-free CAS, and
 *                         the queue is served after it if it was queued
 *   BUG_LIMIT_CHECKS_ELIGIBLE  a limit change takes the lock only when the
 *                         word shows eligible, not whenever it shows queued
 *   BUG_QUEUE_BEHIND_NO_RECHECK  queueBehind queues on its hint without
 *                         looking at the word again under the lock
 *   BUG_IDLE_LOCKFREE     releaseFast ignores the idle flag: the release that
 *                         brings held to zero is a lock-free CAS even while
 *                         the idle flag is set
 *   BUG_FORGET_IDLE_LOCKFREE  changeLimit ignores the idle flag: a Forget
 *                         that brings held to zero is a lock-free CAS
 *   BUG_IDLE_NOT_CLEARED  settle wakes the idle waiters without clearing
 *                         the idle flag
 *   BUG_IDLE_NOT_WOKEN    settle clears the idle flag, but commitLocked does
 *                         not wake the idle waiters
 *   BUG_IDLE_BEFORE_GRANT settle tests for held == 0 before adding the
 *                         permits the walk grants
 * Every BUG_ variant must make pan report an error; scripts/spin.sh checks.
 * NO_I6 turns off I6, to show that a control that breaks it also breaks
 * W, F or WI: a waiter left asleep or overtaken; NO_I8, NO_I9 and NO_WI turn
 * off I8, I9 and WI likewise.
 *
 * Reachability probes, which must fail too, show that the clean runs reach
 * the situations the invariants are about:
 *   REACH_DEBT            the available count goes negative (the limit
 *                         lowered below held)
 *   REACH_SKIP            the walk grants a waiter behind one above the limit
 *   REACH_GRANT_CANCEL    a cancellation finds its waiter already granted
 *   REACH_WAKE_AFTER_UNLOCK  a cancellation finds its waiter granted by a
 *                         handOff that has unlocked and not yet woken it
 *   REACH_CLOSE_PARKED    Close finds parked waiters (use with WITH_CLOSE)
 *   REACH_QUEUED_NOT_ELIGIBLE  with the lock free, the queue state is
 *                         queued (every queued waiter is above the limit)
 *   REACH_PASS_OVERSIZED  an arrival takes permits while a waiter is parked
 *                         (by F, one above the limit)
 *   REACH_LIMIT_GRANTS    a limit change, served under the lock, grants a
 *                         waiter in its CAS
 *   REACH_SKIP_CAS        commitLocked skips its CAS (the waiters served
 *                         take exactly what came back)
 *   REACH_IDLE_WAKE       a dispatch wakes a parked WaitIdle caller
 *   REACH_IDLE_CANCEL     a parked WaitIdle caller whose ctx is done clears
 *                         the idle flag
 */

#define NC 3            /* clients; the monitor's macros are written for 3 */
#ifndef MAXP
#define MAXP 3          /* the semaphore's max, a constant beside the word */
#endif
#ifndef INIT
#define INIT 2          /* initial limit: available = limit = INIT, held 0 */
#endif
#ifndef WANT0
#define WANT0 2         /* client 0's request; 1 makes every request 1 */
#endif
#ifndef CLIENT1_ROUNDS
#define CLIENT1_ROUNDS 1  /* 2: client 1 acquires twice, reusing its event */
#endif

/* Word layout, in the order of internal/state with 3-bit fields: held in
 * bits 0-2, limit in 3-5, idle in bit 6, the queue state in bits 7-8,
 * closed in bit 9. The available count is derived: limit - held, negative
 * in debt. Every word that is eligible (or starving) or closed is at or
 * above BLOCK, so the fast path's test of the flags is one comparison. */
#define LSHIFT    3
#define IDLEBIT   64
#define QSHIFT    7
#define QMASK     384
#define CBIT      512

#define QEMPTY    0     /* nobody is queued */
#define QQUEUED   1     /* waiters, every one above the limit */
#define QELIGIBLE 2     /* a queued waiter fits under the limit */
#define QSTARVING 3     /* barging mode only */
#define BLOCK     (QELIGIBLE << QSHIFT)   /* state.BlockFIFO */

#define HELD(w)     ((w) & 7)
#define LIMIT(w)    (((w) >> LSHIFT) & 7)
#define AVAIL(w)    (LIMIT(w) - HELD(w))
#define QSTATE(w)   (((w) & QMASK) >> QSHIFT)
#define QUEUED(w)   (((w) & QMASK) != 0)
#define ELIGIBLE(w) (((w) & BLOCK) != 0)
#define IDLE(w)     (((w) & IDLEBIT) != 0)
#define CLOSED(w)   (((w) & CBIT) != 0)
#define WORD(h, l)           ((h) | ((l) << LSHIFT))
#define WITHHELD(w, h)       (((w) & ~7) | (h))
#define WITHLIMIT(w, l, h)   (((w) & ~63) | (h) | ((l) << LSHIFT))
#define WITHQUEUE(w, s)      (((w) & ~QMASK) | ((s) << QSHIFT))
/* state.QueueOf(queued, eligible, false) */
#define QUEUEOF(qd, el)      ((qd) -> ((el) -> QELIGIBLE : QQUEUED) : QEMPTY)

/* waiter status, as in atomicsem/waiter.go */
#define WAITING   0
#define GRANTED   1
#define CLOSEDST  2

/* the transitions that serveLocked and the lock-free paths apply */
#define RELEASE     0   /* Word.Release: a token returns n permits */
#define FORGET      1   /* Word.Forget: a token retires n permits */
#define TRYRELEASE  2   /* Word.TryRelease(n) */
#define SETLIMIT    3   /* Word.SetLimit(n) */
#define REFILL      4   /* Word.Refill(n) */
#define DISPATCH    5   /* no change: BUG_LIMIT_DISPATCH_AFTER's serving */

#define NOBODY  NC      /* ghost slot for CASes that move no permits */

short word = WORD(0, INIT);

bit  mu;                /* the queue lock */
byte q[NC];             /* FIFO wait queue of client ids; guarded by mu */
byte qlen;              /* guarded by mu */
byte wn[NC];            /* each client's request */
byte status[NC];        /* guarded by mu */
chan ev[NC] = [1] of { bit };   /* auto-reset events */
bit  idleReg;           /* a WaitIdle caller's channel is listed; guarded by mu */
bit  idleClosed;        /* its channel is closed (wakeIdleLocked) */

/* ghost state */
byte held[NC + 1];      /* permits granted to each client, not yet returned */
byte busy;              /* operations in flight (a parked waiter is not) */
bit  closedSeen;        /* Close has succeeded */
bit  idleCall;          /* a WaitIdle call that found permits held is in flight */
bit  zeroSeen;          /* held has been zero since that call began */
byte finished;          /* processes done */

#define SUMHELD     (held[0] + held[1] + held[2])
#define ADMITS(w, i)   (wn[q[i]] <= LIMIT(w))
/* ANYADMITS: some queued waiter asks for no more than the limit, which is
 * what the eligible state must say (wantIndex.smallest <= limit) */
#define ANYADMITS(w) \
	((qlen > 0 && ADMITS(w, 0)) || (qlen > 1 && ADMITS(w, 1)) || (qlen > 2 && ADMITS(w, 2)))
/* WAITS: a queued waiter that the limit admits and that no dispatch has
 * granted yet (a granted one stays queued until the wake-up step) */
#define WAITS(w, i) (ADMITS(w, i) && held[q[i]] == 0)
#define BLOCKS(w)   ((qlen > 0 && WAITS(w, 0)) || (qlen > 1 && WAITS(w, 1)) || (qlen > 2 && WAITS(w, 2)))
/* PARKED: some queued waiter is not granted yet, whatever it asks for */
#define PARKED      ((qlen > 0 && held[q[0]] == 0) || (qlen > 1 && held[q[1]] == 0) || (qlen > 2 && held[q[2]] == 0))
#define FITQ(i)     (wn[q[i]] <= AVAIL(word))
#define SERVABLE \
	((qlen > 0 && ADMITS(word, 0) && FITQ(0)) || \
	 (qlen > 1 && !ADMITS(word, 0) && ADMITS(word, 1) && FITQ(1)) || \
	 (qlen > 2 && !ADMITS(word, 0) && !ADMITS(word, 1) && ADMITS(word, 2) && FITQ(2)))

#define I1  (LIMIT(word) <= MAXP)
#define I2  (HELD(word) <= MAXP)
#define I4  (HELD(word) == SUMHELD)
#define I5  (!closedSeen || CLOSED(word))
#ifdef NO_I6
#define I6  1           /* to see what a control breaks besides the state */
#else
#define I6  (mu || (QUEUED(word) == (qlen > 0) && ELIGIBLE(word) == ANYADMITS(word) && IDLE(word) == idleReg))
#endif
#define I7  (QSTATE(word) != QSTARVING)
#ifdef NO_I9
#define I9  1
#else
#define I9  (mu || !IDLE(word) || HELD(word) != 0)
#endif
#define W   (busy > 0 || CLOSED(word) || !SERVABLE)
#ifdef NO_WI
#define WI  1
#else
#define WI  (busy > 0 || !idleReg || HELD(word) != 0)
#endif
#if defined(REACH_DEBT)
#define PROBE (AVAIL(word) >= 0)
#elif defined(REACH_QUEUED_NOT_ELIGIBLE)
#define PROBE (mu || QSTATE(word) != QQUEUED)
#else
#define PROBE 1
#endif
#define INV (I1 && I2 && I4 && I5 && I6 && I7 && I9 && W && WI && PROBE)

/* Names for pan's report: each assertion starts with one of these hidden
 * bytes, always 0 and not part of the state, so that a violation reads
 * "assertion violated (W_no_lost_wakeup||...". */
hidden byte I1_limit_le_max, I2_held_le_max, I4_held_matches_tokens;
hidden byte I5_closed_stays, I6_queue_state, I7_never_starving;
hidden byte I8_only_lock_writes, I9_idle_needs_held;
hidden byte W_no_lost_wakeup, WI_no_lost_idle_wakeup, Z_idle_saw_zero;
hidden byte F_fifo, PROBE_reached;
hidden byte E_holds_nothing, E_event_clear, E_end_state;

proctype monitor()
{
end:
	atomic {
		!INV ->
		assert(I1_limit_le_max || I1);
		assert(I2_held_le_max || I2);
		assert(I7_never_starving || I7);
		assert(I4_held_matches_tokens || I4);
		assert(I5_closed_stays || I5);
		assert(I9_idle_needs_held || I9);
		assert(I6_queue_state || I6);
		assert(W_no_lost_wakeup || W);
		assert(WI_no_lost_idle_wakeup || WI);
		assert(PROBE_reached || PROBE)
	}
}

/* The lock is taken in one step with the first load of the word under it,
 * as atomic { mu == 0 -> mu = 1; ... }. That loses no state: a run in which
 * the word changes between taking the lock and the load ends where a run
 * that takes the lock after the change does, and that run is explored. */
inline unlock() { mu = 0 }

/* noteZero: the ghost record for Z, in the step of every write of held. */
inline noteZero() { zeroSeen = zeroSeen || (idleCall && HELD(word) == 0) }

/* cas(old, nw, g, gv, arrive, lockfree): Semaphore.cas. On success the
 * ghost slot g is set to gv in the same step. An arrival (an acquire not
 * served by the dispatch) also checks F against the word it replaced, and a
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
	:: ok -> atomic { word = nw; held[g] = gv; noteZero() }
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
			word = nw; held[g] = gv; noteZero(); ok = true
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
 *   FORGET      held - n, limit max(limit - n, 0)
 *   TRYRELEASE  limit + n, refused when closed or above max
 *   REFILL      limit + min(n, max - limit), refused when closed or at max
 *   SETLIMIT    limit n, refused when closed
 * Written as one expression per field so that each use of it is small. */
inline change(kind, c, n)
{
	assert(kind > FORGET || (n <= HELD(old) && (c == NOBODY || held[c] == n)));
	fits = (kind <= FORGET || !CLOSED(old) &&
		(kind == SETLIMIT ||
		 (kind == TRYRELEASE -> LIMIT(old) + n <= MAXP : LIMIT(old) < MAXP)));
	base = WITHLIMIT(old,
		(kind == RELEASE -> LIMIT(old) :
		 (kind == FORGET -> (LIMIT(old) > n -> LIMIT(old) - n : 0) :
		  (kind == SETLIMIT -> n :
		   (LIMIT(old) + n > MAXP -> MAXP : LIMIT(old) + n)))),
		(kind <= FORGET -> HELD(old) - n : HELD(old)));
#ifdef BUG_DROP_CLOSED
	/* Word.WithHeld loses the closed bit */
	if :: kind == RELEASE -> base = base & ~CBIT :: else fi
#endif
#ifdef BUG_LIMIT_DISPATCH_AFTER
	if :: kind == DISPATCH -> fits = true; base = old :: else fi
#endif
	skip
}

/* removeLocked(c): take client c off the queue. The queue state may then
 * say more than is true (the queue may be empty, or hold only waiters
 * above the limit); the caller, cancelLocked, serves the queue next, and
 * that CAS brings it up to date. Requires mu. */
inline removeLocked(c)
{
	i = 0;
	do
	:: q[i] == c -> break
	:: else -> i++
	od;
	qRemoveAt(i);
	i = 0
}

/* serveLoad(kind, c, n): the deciding half of serveLocked (releaseLocked
 * for RELEASE) and commitLocked. Load the word, apply the transition (base;
 * nop if it refuses), walk the queue as base allows (walkLocked) and build
 * the word to install (settle). A waiter above the limit is passed over;
 * the first other waiter that does not fit stops the walk, and then the
 * queue stays eligible. If that leaves no permit held, the idle flag is
 * cleared and widle says to wake the idle waiters. mask marks the queue
 * positions served, k counts them, and nop says that there is nothing to
 * do. Requires mu. */
inline serveLoad(kind, c, n)
{
	old = word; widle = false;
	change(kind, c, n);
	if
	:: !fits -> nop = true      /* refused: serveLocked returns false */
	:: fits ->
		free = AVAIL(base); gr = 0; mask = 0; k = 0; stopped = false;
		if
		:: CLOSED(base)     /* Close has failed everyone queued */
		:: else ->
			j = 0;
			do
			:: j < qlen && wn[q[j]] > LIMIT(base) ->
#ifdef BUG_NO_SKIP
				stopped = true; break
#else
				j++
#endif
			:: j < qlen && wn[q[j]] <= LIMIT(base) && free < wn[q[j]] ->
				stopped = true; break
			:: j < qlen && wn[q[j]] <= LIMIT(base) && free >= wn[q[j]] ->
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
		/* settle */
		nw = WITHQUEUE(WITHHELD(base, HELD(base) + gr), QUEUEOF(k < qlen, stopped));
		if
#if defined(BUG_IDLE_BEFORE_GRANT)
		:: IDLE(nw) && HELD(base) == 0 -> nw = nw & ~IDLEBIT; widle = true
#elif defined(BUG_IDLE_NOT_CLEARED)
		:: IDLE(nw) && HELD(nw) == 0 -> widle = true
#else
		:: IDLE(nw) && HELD(nw) == 0 -> nw = nw & ~IDLEBIT; widle = true
#endif
		:: else
		fi;
		nop = (k == 0 && nw == old)
	fi;
	base = 0; free = 0; gr = 0; stopped = false; fits = false
}

/* casServe: commitLocked's CAS. On success the permits that c returns
 * leave it and the served waiters hold theirs, in the same step (ghost). */
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
	:: ok -> atomic { word = nw; grantGhost(c); noteZero() }
	:: else
	fi
#else
	atomic {
		if
		:: word == old -> word = nw; grantGhost(c); noteZero(); ok = true
		:: else -> ok = false
		fi
	}
#endif
}

/* wakeServed: walkLocked with wake set: take the served waiters off the
 * queue, mark them granted and set their events. Requires mu. */
inline wakeServed()
{
	j = qlen;
	do
	:: j > 0 ->
		j--;
		if
		:: mask & (1 << j) ->
			w = q[j]; i = j; qRemoveAt(i); j = i;
			status[w] = GRANTED; setEvent(w)
		:: else
		fi
	:: else -> break
	od;
	i = 0; j = 0; w = 0; mask = 0; k = 0
}

/* wakeIdleLocked: close the channels of the WaitIdle callers, after the
 * CAS that left no permit held and cleared the idle flag. Requires mu. */
inline wakeIdleLocked()
{
#ifndef BUG_IDLE_NOT_WOKEN
	if
	:: widle && idleReg ->
#ifdef REACH_IDLE_WAKE
		assert(PROBE_reached);
#endif
		idleReg = 0; idleClosed = 1
	:: else
	fi;
#endif
	widle = false
}

/* SHORTCUT(w, n): handOff's test for the hand-off of n returned permits
 * straight to the front waiter, without the walks and without a write to
 * the word: n are held, nothing is free, the front waiter asks for n and
 * the one behind it fits under the limit. */
#define SHORTCUT(w, n) \
	(HELD(w) >= (n) && HELD(w) == LIMIT(w) && qlen > 1 && wn[q[0]] == (n) && wn[q[1]] <= LIMIT(w))

/* Which word sends a change to the lock rather than a lock-free CAS:
 * releaseFast refuses when the word shows eligible (a queued waiter fits
 * under the limit) or the idle flag (a WaitIdle caller waits, and the
 * release that leaves no permit held must wake it: ReleaseBlocked);
 * changeLimit serves whenever the queue state is
 * queued or higher, since the new limit decides which waiters are eligible,
 * and when the change leaves no permit held while the idle flag is set. */
#if defined(BUG_SKIP_WAKE)
#define RELEASELOCK(o, nw)  IDLE(o)
#elif defined(BUG_IDLE_LOCKFREE)
#define RELEASELOCK(o, nw)  ELIGIBLE(o)
#else
#define RELEASELOCK(o, nw)  (IDLE(o) || ELIGIBLE(o))
#endif
#if defined(BUG_FORGET_IDLE_LOCKFREE)
#define IDLELOCK(o, nw)  0
#else
#define IDLELOCK(o, nw)  (IDLE(o) && HELD(nw) == 0)
#endif
#if defined(BUG_LIMIT_LOCKFREE) || defined(BUG_LIMIT_DISPATCH_AFTER)
#define LIMITLOCK(o, nw)  IDLELOCK(o, nw)
#elif defined(BUG_LIMIT_CHECKS_ELIGIBLE)
#define LIMITLOCK(o, nw)  (ELIGIBLE(o) || IDLELOCK(o, nw))
#else
#define LIMITLOCK(o, nw)  (QUEUED(o) || IDLELOCK(o, nw))
#endif
#define SERVES(kind, o, nw)  ((kind) == RELEASE -> RELEASELOCK(o, nw) : LIMITLOCK(o, nw))

/* changeLoad(kind, c, n): load, apply the transition; nw is the word a
 * lock-free CAS installs. */
inline changeLoad(kind, c, n)
{
	old = word; change(kind, c, n); nw = base; base = 0
}

/* updateServe(c): a token's Release (kind RELEASE: releaseFast, then
 * releaseSlow, which in FIFO mode is handOff) or changeLimit (FORGET for
 * forgetPermits, TRYRELEASE, REFILL, SETLIMIT) of amt, after its first
 * changeLoad; c is the client whose permits it returns (its ghost slot).
 * They share one shape: if the transition refuses, return; if the word
 * asks for it, serve the queue under mu; otherwise a plain CAS, retried on
 * failure, with no dispatch after it.
 *
 * Serving the queue: for RELEASE, handOff takes mu and, if SHORTCUT holds,
 * grants the front waiter the permits c returns in that step (the word
 * does not change: held goes down by amt and up by amt) and wakes it after
 * releasing mu, in a step of its own (the operation is in flight until
 * then); otherwise it calls releaseLocked. For a limit change,
 * Semaphore.serve calls serveLocked(change, arg) under mu. Both are
 * serveLoad, then commitLocked: CAS, and on failure decide again from a
 * fresh load (label reload, where a cancellation, which holds mu already,
 * comes in for releaseLocked); wake the served waiters and the idle
 * waiters only after the CAS succeeds. A dispatch that leaves the word as
 * it was, while the word shows eligible, skips the CAS: no lock-free
 * writer may change such a word (I8), so it must still be old, and the
 * grant takes effect there, in the step that wakes the waiters.
 *
 * Used once per process, so that pan stays small; it goes on at the
 * caller's label updated. */
inline updateServe(c)
{
update:
	do
	:: !fits -> atomic { busy--; old = 0; nw = 0 }; goto updated
	:: fits && SERVES(kind, old, nw) ->
		atomic {
			mu == 0 -> mu = 1; fits = false;
			if
			:: kind == RELEASE && SHORTCUT(word, amt) ->
#ifndef NO_I6
				assert(I6_queue_state || ELIGIBLE(word));
#endif
				pend = q[0]; qRemoveAt(0); status[pend] = GRANTED;
				held[c] = 0; held[pend] = amt;
				unlock(); old = 0; nw = 0; goto wakeFront
			:: else -> serveLoad(kind, c, amt); goto serving
			fi
		}
	:: fits && !SERVES(kind, old, nw) ->
		cas(old, nw, c, 0, false, true);
		if
		:: ok ->
#ifdef BUG_LIMIT_DISPATCH_AFTER
			/* serve the queue after the change, changing nothing else */
			if
			:: kind != RELEASE && QUEUED(old) ->
				atomic { mu == 0 -> mu = 1; kind = DISPATCH; fits = false; ok = false };
				goto reload
			:: else
			fi;
#endif
			atomic { busy--; fits = false; old = 0; nw = 0; ok = false }; goto updated
		:: else -> atomic { changeLoad(kind, c, amt) }
		fi
	od;
reload:
	atomic { serveLoad(kind, c, amt) };
serving:
	do
	:: nop -> break
	:: !nop && nw == old && ELIGIBLE(old) ->
#ifdef REACH_SKIP_CAS
		assert(PROBE_reached);
#endif
		atomic {
#ifndef NO_I8
			assert(I8_only_lock_writes || word == old);
#endif
			grantGhost(c); wakeServed(); wakeIdleLocked()
		};
		break
	:: !nop && !(nw == old && ELIGIBLE(old)) ->
		casServe(c);
		if
		:: ok -> atomic { wakeServed(); wakeIdleLocked() }; break
		:: else -> goto reload
		fi
	od;
	atomic { unlock(); busy--; nop = false; widle = false; old = 0; nw = 0; ok = false; goto updated };
wakeFront:
	atomic { setEvent(pend); pend = NOBODY; busy--; goto updated }
}

/* Semaphore.Close: the closed bit is set and the queue state emptied in one
 * CAS, then every queued waiter is told, under mu; the controller's only
 * operation with WITH_CLOSE, so it ends the controller too. */
inline close()
{
	atomic { mu == 0 -> mu = 1; busy++; old = word }
	do
	:: CLOSED(old) -> break
	:: !CLOSED(old) ->
		atomic {
			if
			:: word == old ->
				word = WITHQUEUE(old | CBIT, QEMPTY); closedSeen = 1; ok = true
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
	atomic { unlock(); busy--; old = 0; ok = 0; finished++ }
}

/* takeLoad(n): takeOrQueueLocked's load and decision. fits is
 * mayTakeLocked: n permits are free and the word does not show eligible
 * (exact under mu); nw is the word with the queue state for queueing:
 * eligible if it was or if n is within the limit, queued otherwise.
 * Requires mu. */
inline takeLoad(n)
{
	old = word;
	fits = AVAIL(old) >= n && !ELIGIBLE(old);
#if defined(BUG_ELIGIBLE_NOT_SET)
	nw = WITHQUEUE(old, QUEUEOF(true, ELIGIBLE(old)))
#elif defined(BUG_QUEUE_OR)
	nw = old | (QUEUEOF(true, ELIGIBLE(old) || n <= LIMIT(old)) << QSHIFT)
#else
	nw = WITHQUEUE(old, QUEUEOF(true, ELIGIBLE(old) || n <= LIMIT(old)))
#endif
}

/* fastLoad(n): acquireFast's test: the word is below the block (neither
 * eligible nor closed) and n permits are free. */
#ifdef BUG_OVERTAKE
#define FASTBLOCK CBIT
#else
#define FASTBLOCK BLOCK
#endif
inline fastLoad(n)
{
	old = word;
	fits = old < FASTBLOCK && HELD(old) + n <= LIMIT(old)
}

/* A client acquires n permits (rounds times), then releases them, or, if
 * canForget, may forget them and add them back with TryRelease. If
 * canCancel, its context may be done at any moment while it is parked, or
 * be found done when it wakes. */
proctype client(byte me; byte n; bit canCancel; bit canForget; byte rounds)
{
	short old, nw, base, free, gr;
	bool ok, fits, nop, stopped, widle, forgot;
	byte pend = NOBODY;
	byte i, j, k, w, mask, kind, amt;

again:
	/* acquireFast: retry the CAS while the test still holds */
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

	/* queueBehind: with the word eligible (the fast path's failed load is
	 * its hint), lock, and if it still shows eligible queue at the back
	 * with no CAS; otherwise unlock and go on to acquireSlow. Neither
	 * branch writes the word, so the lock is taken and released in one
	 * step. */
	if
	:: ELIGIBLE(old) ->
		atomic {
			mu == 0 ->
			if
#ifdef BUG_QUEUE_BEHIND_NO_RECHECK
			:: true ->
#else
			:: ELIGIBLE(word) ->
#endif
				status[me] = WAITING; q[qlen] = me; qlen++;
				busy--; old = 0; fits = 0; goto park
			:: else
			fi
		}
	:: else
	fi;

	/* acquireSlow: takeOrQueueLocked(n, nil); the lock is taken in the
	 * step of the first load */
	atomic { mu == 0 -> mu = 1; takeLoad(n) }
	do
	:: CLOSED(old) -> atomic { unlock(); busy--; old = 0; nw = 0; fits = 0; goto done }
	:: !CLOSED(old) && fits ->
		cas(old, WITHHELD(old, HELD(old) + n), me, n, true, false);
		if
		:: ok -> atomic { unlock(); busy--; old = 0; nw = 0; fits = 0; ok = 0; goto holding }
		:: else -> atomic { takeLoad(n) }
		fi
	:: !CLOSED(old) && !fits ->
		/* set the queue state before queueing, under mu */
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

park:
	/* Acquire's wait: the event, or the context (withdraw takes the lock
	 * first). What the waiter does on waking is decided in the step that
	 * consumes the wake-up. */
	if
	:: atomic {
		ev[me]?_ ->
		if
		:: status[me] == GRANTED -> goto holding
		:: canCancel && status[me] == GRANTED -> goto lateCancel
		:: status[me] == CLOSEDST -> goto done    /* settleWake */
		:: else -> assert(false)    /* woken without a decision */
		fi
	   }
	:: atomic {
		canCancel && mu == 0 -> mu = 1; busy++;
cancel:
		/* withdraw, then cancelLocked, in the step that takes the lock
		 * (the lock guards all they read); each branch but the last goes
		 * on to releaseLocked(amt), which serves the queue: with the
		 * returned permits for a grant, and for a waiting waiter (amt 0)
		 * because its removal may let the waiters behind it fit, and the
		 * queue state must stop counting it */
		if
		:: status[me] == WAITING ->
			removeLocked(me);
#ifdef BUG_NO_CANCEL_NOTIFY
			unlock(); busy--; goto done
#else
			goto reload
#endif
		:: status[me] == GRANTED ->
			/* the grant raced the cancellation: pass the permits on */
#ifdef REACH_GRANT_CANCEL
			assert(PROBE_reached);
#endif
#ifdef BUG_LOSE_ON_CANCEL
			tryWait(me); unlock(); busy--; goto done
#endif
			/* consume the wake-up: a handOff that granted the permits
			 * after unlocking may not have sent it yet, and then the
			 * waiter waits for it without the lock (waitWake) */
#ifdef BUG_NO_WAIT_FOR_WAKE
			tryWait(me); amt = n; goto reload
#else
			if
			:: nempty(ev[me]) -> ev[me]?_; amt = n; goto reload
			:: empty(ev[me]) ->
#ifdef REACH_WAKE_AFTER_UNLOCK
				assert(PROBE_reached);
#endif
				unlock(); goto waitWake
			fi
#endif
		:: status[me] == CLOSEDST ->
			tryWait(me); unlock(); busy--; goto done
		fi
	   }
	fi;

waitWake:
	ev[me]?_;
	atomic { mu == 0 -> mu = 1; amt = n; goto reload };

lateCancel:
	/* the ctx is found done after the wake-up, and wins: withdraw with the
	 * wake-up consumed; cancelLocked gives the permits back with
	 * releaseLocked(n) */
	atomic {
		mu == 0 -> mu = 1; busy++; amt = n;
#ifdef BUG_WOKE_WAITS_AGAIN
		goto cancel
#else
		goto reload
#endif
	};

nextOp:
	/* the TryRelease after a Forget: its first load */
	atomic { busy++; changeLoad(kind, me, amt); goto update };

holding:
	/* Token.Release, or Token.Forget and then TryRelease to add the
	 * permits back */
	atomic {
		if
		:: kind = RELEASE
		:: canForget -> kind = FORGET; forgot = true
		fi;
		amt = n; busy++; changeLoad(kind, me, amt)
	}
	updateServe(me);
	/* The step that ends an operation jumps to updated or done, inside
	 * this atomic sequence, so that what comes next is decided in that
	 * same step (the skip is never reached). */
	atomic {
		skip;
updated:
		if
		:: forgot -> forgot = false; kind = TRYRELEASE; goto nextOp
		:: else
		fi;
done:
		/* no permits left behind, and the free list's precondition */
		assert(E_holds_nothing || held[me] == 0);
		assert(E_event_clear || len(ev[me]) == 0);
		kind = RELEASE; amt = 0;
		if
		:: rounds > 1 -> rounds--; goto again
		:: else -> finished++
		fi
	}
}

/* casIdle(nw): a CAS of the idle flag by WaitIdle, under mu. */
inline casIdle(nw)
{
	atomic {
		if
		:: word == old -> word = nw; ok = true
		:: else -> ok = false
		fi
	}
}

/* WaitIdle, called in place of client 2's acquire. If canCancel, its
 * context may be done at any moment while it is parked. */
proctype idler(bit canCancel)
{
	short old;
	bool ok;

	/* nothing held: return at once */
	atomic {
		if
		:: HELD(word) == 0 -> goto out
		:: else -> idleCall = 1
		fi
	}
	/* under mu, set the idle flag by CAS unless held is zero; the lock is
	 * taken in the step of the first load */
	atomic { mu == 0 -> mu = 1; old = word }
	do
	:: HELD(old) == 0 -> atomic { unlock(); goto out }
	:: HELD(old) != 0 && IDLE(old) -> break
	:: HELD(old) != 0 && !IDLE(old) ->
		casIdle(old | IDLEBIT);
		if
		:: ok -> break
		:: else -> old = word
		fi
	od;
	/* list the channel, unlock and park: the channel, or the context */
	atomic { idleReg = 1; unlock(); old = 0; ok = false }
	if
	:: atomic { idleClosed -> assert(Z_idle_saw_zero || zeroSeen); goto out }
	:: atomic {
		canCancel && mu == 0 -> mu = 1;
		if
		:: idleClosed ->    /* woken meanwhile */
			assert(Z_idle_saw_zero || zeroSeen); unlock(); goto out
		:: else -> idleReg = 0; old = word
		fi
	   }
#ifdef REACH_IDLE_CANCEL
		assert(PROBE_reached);
#endif
		/* nobody waits any more: clear the flag, a CAS loop under mu */
		do
		:: casIdle(old & ~IDLEBIT);
		   if
		   :: ok -> break
		   :: else -> old = word
		   fi
		od;
		atomic { unlock(); goto out }
	fi;
	/* Every way out jumps into this atomic sequence, so that the call ends
	 * in the step that returns (the skip is never reached). */
	atomic {
		skip;
out:
		idleCall = 0; zeroSeen = 0; idleClosed = 0; old = 0; ok = false;
		finished++
	}
}

/* The controller moves the limit down (into debt if tokens hold more) or
 * up, then restores it to max so that every client can finish: its first
 * change (kind, amt) is chosen by init. With WITH_CLOSE it closes the
 * semaphore instead, at any moment. */
proctype controller(byte kind; byte amt)
{
	short old, nw, base, free, gr;
	bool ok, fits, nop, stopped, widle, last;
	byte pend = NOBODY;
	byte i, j, k, w, mask;

#ifndef WITH_CLOSE
nextOp:
	atomic { busy++; changeLoad(kind, NOBODY, amt) };
	updateServe(NOBODY);
	/* as in client: decided in the step that ends the operation */
	atomic {
		skip;
updated:
		if
		:: !last -> last = true; kind = SETLIMIT; amt = MAXP; goto nextOp
		:: else -> finished++
		fi
	}
#else
	close()
#endif
}

init
{
	atomic {
		wn[0] = WANT0; wn[1] = 1; wn[2] = 1;
		run client(0, WANT0, 1, 0, 1);
		run client(1, 1, 1, 1, CLIENT1_ROUNDS);
		/* client 2 acquires, or waits for idle (with a context that may
		 * be done, or not) */
		if
#ifndef CLIENT2_WAITS_IDLE
		:: run client(2, 1, 0, 0, 1)
#endif
#ifndef CLIENT2_ACQUIRES
		:: run idler(0)
		:: run idler(1)
#endif
		fi;
#ifdef WITH_CLOSE
		run controller(0, 0)
#else
		if
		:: run controller(SETLIMIT, 0)
		:: run controller(SETLIMIT, 1)
		:: run controller(REFILL, 2)
		fi;
#endif
		run monitor()
	}
	finished == NC + 1;
	assert(E_end_state || qlen == 0 && !QUEUED(word) && mu == 0 && busy == 0);
	assert(E_end_state || !IDLE(word) && idleReg == 0);
	assert(E_end_state || HELD(word) == 0 && SUMHELD == 0);
	assert(E_end_state || len(ev[0]) == 0 && len(ev[1]) == 0 && len(ev[2]) == 0);
#ifndef WITH_CLOSE
	assert(E_end_state || LIMIT(word) == MAXP)
#endif
}
