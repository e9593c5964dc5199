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
 * operations are in flight, so that the monitor can state the invariants:
 *
 *   I1  0 <= total <= max
 *   I2  count <= total
 *   I3  held <= max
 *   I4  held (total - count) equals the permits granted and not yet returned
 *   I5  closed, once set, stays set
 *   I6  with the lock free, the waiters flag is set iff the queue is non-empty
 *   W   work conservation: when no operation is in flight, the first waiter
 *       that the limit admits does not fit in the free permits (no lost
 *       wake-up: nobody sleeps while permits that fit are free)
 *   F   FIFO: an arrival never takes permits while a waiter that the limit
 *       admits is queued
 *
 * At the end every client must hold nothing, the queue must be empty with
 * the waiters flag clear, count == total, and every event must be clear.
 * A client parked forever, or blocked on the lock, is an invalid end state.
 *
 * Variants, chosen with spin -D<NAME> -a semaphore.pml:
 *   WITH_CLOSE            the controller closes the semaphore instead of
 *                         moving its limit
 *   BUG_SKIP_WAKE         Release returns its permits with a plain CAS even
 *                         when the waiters flag is set (no hand-off)
 *   BUG_NO_CANCEL_NOTIFY  cancelling a waiting waiter does not dispatch
 *   BUG_LOSE_ON_CANCEL    a grant that raced a cancellation is dropped
 *   BUG_NONATOMIC         the CAS compares and stores in two steps
 *   BUG_NO_SKIP           dispatch stops at a waiter above the limit
 *   BUG_OVERTAKE          the fast path ignores the waiters flag
 *   BUG_DROP_CLOSED       Release rebuilds the word without the closed flag
 *                         (use with WITH_CLOSE)
 * Every BUG_ variant must make pan report an error; scripts/spin.sh checks.
 *
 * Reachability probes, which must fail too, show that the clean runs reach
 * the situations the invariants are about:
 *   REACH_DEBT            the count goes negative (limit lowered below held)
 *   REACH_SKIP            dispatch grants a waiter behind one above the limit
 *   REACH_GRANT_CANCEL    a cancellation finds its waiter already granted
 *   REACH_CLOSE_PARKED    Close finds parked waiters (use with WITH_CLOSE)
 */

#define NC 3            /* clients; the monitor's macros are written for 3 */
#ifndef MAXP
#define MAXP 3          /* the semaphore's max */
#endif
#ifndef INIT
#define INIT 2          /* initial count and total */
#endif
#ifndef CLIENT1_ROUNDS
#define CLIENT1_ROUNDS 1  /* 2: client 1 acquires twice, reusing its event */
#endif

/* Word layout: count + OFF in bits 0-3, total in 4-6, max in 7-9,
 * waiters in bit 10, closed in bit 11. */
#define OFF     8
#define CMASK   15
#define TSHIFT  4
#define MSHIFT  7
#define WBIT    1024
#define CBIT    2048

#define COUNT(w)    (((w) & CMASK) - OFF)
#define TOTAL(w)    (((w) >> TSHIFT) & 7)
#define MAXF(w)     (((w) >> MSHIFT) & 7)
#define HELD(w)     (TOTAL(w) - COUNT(w))
#define WAITERS(w)  (((w) & WBIT) != 0)
#define CLOSED(w)   (((w) & CBIT) != 0)
#define WORD(c, t, m)        (((c) + OFF) | ((t) << TSHIFT) | ((m) << MSHIFT))
#define WITHCOUNT(w, c)      (((w) & ~CMASK) | ((c) + OFF))
#define WITHTOTAL(w, t, c)   (((w) & ~(CMASK | (7 << TSHIFT))) | ((c) + OFF) | ((t) << TSHIFT))

/* waiter status, as in atomicsem/waiter.go */
#define WAITING   0
#define GRANTED   1
#define CLOSEDST  2

#define NOBODY  NC      /* ghost slot for CASes that move no permits */

short word = WORD(INIT, INIT, MAXP);

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
/* BLOCKS: a queued waiter that the limit admits and that no dispatch has
 * granted yet (a granted one stays queued until the wake-up step) */
#define WAITS(w, i) (ADMITS(w, i) && held[q[i]] == 0)
#define BLOCKS(w)   ((qlen > 0 && WAITS(w, 0)) || (qlen > 1 && WAITS(w, 1)) || (qlen > 2 && WAITS(w, 2)))
#define FITQ(i)     (wn[q[i]] <= COUNT(word))
#define SERVABLE \
	((qlen > 0 && ADMITS(word, 0) && FITQ(0)) || \
	 (qlen > 1 && !ADMITS(word, 0) && ADMITS(word, 1) && FITQ(1)) || \
	 (qlen > 2 && !ADMITS(word, 0) && !ADMITS(word, 1) && ADMITS(word, 2) && FITQ(2)))

#define I1  (TOTAL(word) <= MAXF(word))
#define I2  (COUNT(word) <= TOTAL(word))
#define I3  (HELD(word) <= MAXF(word))
#define I4  (HELD(word) == SUMHELD)
#define I5  (!closedSeen || CLOSED(word))
#define I6  (mu || WAITERS(word) == (qlen > 0))
#define W   (busy > 0 || CLOSED(word) || !SERVABLE)
#ifdef REACH_DEBT
#define PROBE (COUNT(word) >= 0)
#else
#define PROBE 1
#endif
#define INV (I1 && I2 && I3 && I4 && I5 && I6 && W && PROBE)

active proctype monitor()
{
end:
	atomic {
		!INV ->
		assert(I1); assert(I2); assert(I3); assert(I4);
		assert(I5); assert(I6); assert(W); assert(PROBE)
	}
}

/* The lock is taken in one step with the first load of the word under it,
 * as atomic { mu == 0 -> mu = 1; ... }. That loses no state: a run in which
 * the word changes between taking the lock and the load ends where a run
 * that takes the lock after the change does, and that run is explored. */
inline unlock() { mu = 0 }

/* cas(old, nw, g, gv, arrive): Semaphore.cas. On success the ghost slot g is
 * set to gv in the same step. An arrival (an acquire not served by dispatch)
 * also checks F against the word it replaced. */
inline cas(old, nw, g, gv, arrive)
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
			assert(!arrive || !BLOCKS(old));
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

/* removeLocked(c): take client c off the queue and, once it is empty, clear
 * the waiters flag by CAS. Requires mu. */
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
	if
	:: qlen == 0 ->
		do
		:: old = word;
			cas(old, old & ~WBIT, NOBODY, 0, false);
			if :: ok -> break :: else fi
		od
	:: else
	fi
}

/* serveLoad(c, n): the deciding half of serveLocked. Load the word, return
 * client c's n permits to it (base), walk the queue as base allows
 * (walkLocked) and build the word to install (settle). A waiter above the
 * limit is passed over; the first other waiter that does not fit stops the
 * walk. mask marks the queue positions served, k counts them, and idle says
 * that there is nothing to do. Requires mu. */
inline serveLoad(c, n)
{
	old = word;
	assert(n <= HELD(old) && (c == NOBODY || held[c] == n));
	base = WITHCOUNT(old, COUNT(old) + n);
	free = COUNT(base); gr = 0; mask = 0; k = 0;
	if
	:: CLOSED(base)     /* Close has failed everyone queued */
	:: else ->
		j = 0;
		do
		:: j < qlen && wn[q[j]] > TOTAL(base) ->
#ifdef BUG_NO_SKIP
			break
#else
			j++
#endif
		:: j < qlen && wn[q[j]] <= TOTAL(base) && free < wn[q[j]] -> break
		:: j < qlen && wn[q[j]] <= TOTAL(base) && free >= wn[q[j]] ->
#ifdef REACH_SKIP
			assert(j == 0 || k > 0);
#endif
			free = free - wn[q[j]]; gr = gr + wn[q[j]];
			mask = mask | (1 << j); k++; j++
		:: else -> break
		od;
		j = 0
	fi;
	nw = WITHCOUNT(base, COUNT(base) - gr);
	if
	:: k == qlen -> nw = nw & ~WBIT    /* the queue empties */
	:: else
	fi;
	idle = (n == 0 && k == 0 && nw == old);
	base = 0; free = 0; gr = 0
}

/* casServe: serveLocked's CAS. On success the returned permits leave c and
 * the served waiters hold theirs, in the same step (ghost). */
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

/* serveLocked(c, n): return n permits held by client c (none if n is 0) and
 * serve the queue with what is then available, in one CAS; wake the served
 * waiters only after it succeeds. Requires mu. */
inline serveLocked(c, n)
{
	atomic { serveLoad(c, n) }
	do
	:: idle -> break
	:: !idle ->
		casServe(c);
		if
		:: ok -> atomic { wakeServed() }; break
		:: else -> atomic { serveLoad(c, n) }
		fi
	od;
	atomic { idle = 0; mask = 0; k = 0; old = 0; nw = 0; ok = 0 }
}

/* dispatchIfWaiters: old is the word the caller's CAS replaced. Ends the
 * caller's operation. */
inline dispatchIfWaiters()
{
	if
	:: WAITERS(old) ->
		atomic { mu == 0 -> mu = 1; serveLoad(NOBODY, 0) }
		do
		:: idle -> break
		:: !idle ->
			casServe(NOBODY);
			if
			:: ok -> atomic { wakeServed() }; break
			:: else -> atomic { serveLoad(NOBODY, 0) }
			fi
		od;
		atomic { unlock(); busy--; idle = 0; mask = 0; k = 0; old = 0; nw = 0; ok = 0 }
	:: else -> atomic { busy--; old = 0; nw = 0; ok = 0 }
	fi
}

#ifdef BUG_SKIP_WAKE
#define HANDOFF(w)  0
#else
#define HANDOFF(w)  WAITERS(w)
#endif

/* owner.ReturnPermits: with waiters parked, the permits go back under mu in
 * the CAS that hands them on (returnToQueue); otherwise by a plain CAS. */
inline releaseLoad(c, n)
{
	old = word; assert(held[c] == n && n <= HELD(old));
#ifdef BUG_DROP_CLOSED
	nw = WORD(COUNT(old) + n, TOTAL(old), MAXF(old)) | (old & WBIT)
#else
	nw = WITHCOUNT(old, COUNT(old) + n)
#endif
}

inline release(c, n)
{
	atomic { busy++; releaseLoad(c, n) }
	do
	:: HANDOFF(old) ->
		atomic { mu == 0 -> mu = 1; serveLoad(c, n) }
		do
		:: idle -> break
		:: !idle ->
			casServe(c);
			if
			:: ok -> atomic { wakeServed() }; break
			:: else -> atomic { serveLoad(c, n) }
			fi
		od;
		atomic { unlock(); busy--; idle = 0; mask = 0; k = 0; old = 0; nw = 0; ok = 0 };
		break
	:: !HANDOFF(old) ->
		cas(old, nw, c, 0, false);
		if
		:: ok -> atomic { busy--; old = 0; nw = 0; ok = 0 }; break
		:: else -> atomic { releaseLoad(c, n) }
		fi
	od
}

/* owner.ForgetPermits */
inline forgetLoad(c, n)
{
	old = word; h = HELD(old); assert(held[c] == n && n <= h);
	t = TOTAL(old) - n;
	if :: t < 0 -> t = 0 :: else fi;
	nw = WITHTOTAL(old, t, t - (h - n));
	h = 0; t = 0
}

inline forget(c, n)
{
	atomic { busy++; forgetLoad(c, n) }
	do
	:: cas(old, nw, c, 0, false);
		if
		:: ok -> break
		:: else -> atomic { forgetLoad(c, n) }
		fi
	od;
	dispatchIfWaiters()
}

/* Semaphore.TryRelease; fits says whether it may proceed. */
inline tryReleaseLoad(n)
{
	old = word;
	fits = !CLOSED(old) && TOTAL(old) + n <= MAXF(old);
	nw = WITHTOTAL(old, TOTAL(old) + n, COUNT(old) + n)
}

inline tryRelease(n)
{
	atomic { busy++; tryReleaseLoad(n) }
	do
	:: !fits -> atomic { busy--; old = 0; nw = 0 }; break
	:: fits ->
		cas(old, nw, NOBODY, 0, false);
		if
		:: ok -> fits = 0; dispatchIfWaiters(); break
		:: else -> atomic { tryReleaseLoad(n) }
		fi
	od
}

/* Semaphore.SetLimit */
inline setLimitLoad(l)
{
	old = word;
	fits = !CLOSED(old);
	nw = WITHTOTAL(old, l, l - HELD(old))
}

inline setLimit(l)
{
	atomic { busy++; setLimitLoad(l) }
	do
	:: !fits -> atomic { busy--; old = 0; nw = 0 }; break
	:: fits ->
		cas(old, nw, NOBODY, 0, false);
		if
		:: ok -> fits = 0; dispatchIfWaiters(); break
		:: else -> atomic { setLimitLoad(l) }
		fi
	od
}

/* Semaphore.Close: the closed flag is set and the waiters flag cleared in
 * one CAS, then every queued waiter is told, under mu. */
inline close()
{
	atomic { mu == 0 -> mu = 1; busy++; old = word }
	do
	:: CLOSED(old) -> break
	:: !CLOSED(old) ->
		atomic {
			if
			:: word == old ->
				word = (old | CBIT) & ~WBIT; closedSeen = 1; ok = true
			:: else -> ok = false
			fi
		}
		if
		:: ok ->
#ifdef REACH_CLOSE_PARKED
			assert(qlen == 0);
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

/* mayTakeLoad(n): load the word and decide mayTakeLocked: n permits are
 * free and every queued waiter asks for more than the limit. Requires mu. */
inline mayTakeLoad(n)
{
	old = word;
	fits = (COUNT(old) >= n);
	j = 0;
	do
	:: j < qlen -> if :: ADMITS(old, j) -> fits = false :: else fi; j++
	:: else -> break
	od;
	j = 0
}

/* fastLoad(n): the fast path's test: nothing blocks an arrival and n permits
 * are free. */
inline fastLoad(n)
{
	old = word;
#ifdef BUG_OVERTAKE
	fits = (old & CBIT) == 0 && COUNT(old) >= n
#else
	fits = (old & (WBIT | CBIT)) == 0 && COUNT(old) >= n
#endif
}

/* A client acquires n permits (rounds times), then releases them, or, if
 * canForget, may forget them and add them back with TryRelease. If
 * canCancel, its context may be cancelled at any moment while it is parked. */
proctype client(byte me; byte n; bit canCancel; bit canForget; byte rounds)
{
	short old, nw, t, h, base, free, gr;
	bool ok, fits, idle;
	byte i, j, k, w, mask;

again:
	/* Acquire's fast path: retry the CAS while the test still holds */
	atomic { busy++; fastLoad(n) }
	do
	:: fits ->
		cas(old, WITHCOUNT(old, COUNT(old) - n), me, n, true);
		if
		:: ok -> atomic { busy--; old = 0; fits = 0; ok = 0; goto holding }
		:: else -> atomic { fastLoad(n) }
		fi
	:: !fits -> break
	od;

	/* acquireSlow: takeOrQueueLocked(n, nil); the lock is taken in the
	 * step of the first load */
	atomic { mu == 0 -> mu = 1; mayTakeLoad(n) }
	do
	:: CLOSED(old) -> atomic { unlock(); busy--; old = 0; fits = 0; goto failed }
	:: !CLOSED(old) && fits ->
		cas(old, WITHCOUNT(old, COUNT(old) - n), me, n, true);
		if
		:: ok -> atomic { unlock(); busy--; old = 0; fits = 0; ok = 0; goto holding }
		:: else -> atomic { mayTakeLoad(n) }
		fi
	:: !CLOSED(old) && !fits ->
		/* set the flag before queueing, under mu */
		if
		:: WAITERS(old) -> ok = true
		:: else -> cas(old, old | WBIT, NOBODY, 0, false)
		fi;
		if
		:: ok -> break
		:: else -> atomic { mayTakeLoad(n) }
		fi
	od;
	atomic {
		status[me] = WAITING; q[qlen] = me; qlen++;
		unlock(); busy--; old = 0; ok = 0; fits = 0
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
		removeLocked(me);
#ifdef BUG_NO_CANCEL_NOTIFY
		atomic { unlock(); busy--; goto failed }
#endif
		skip
	:: status[me] == GRANTED ->
		/* the grant raced the cancellation: pass the permits on */
#ifdef REACH_GRANT_CANCEL
		assert(false);
#endif
		tryWait(me);
#ifdef BUG_LOSE_ON_CANCEL
		atomic { unlock(); busy--; goto failed }
#endif
		/* return the permits and serve the queue with them in one CAS */
		serveLocked(me, n);
		atomic { unlock(); busy--; goto failed }
	:: status[me] == CLOSEDST ->
		tryWait(me);
		atomic { unlock(); busy--; goto failed }
	fi;
	/* dispatchLocked: removing w may let the waiters behind it fit */
	serveLocked(NOBODY, 0);
	atomic { unlock(); busy--; goto failed };

holding:
	if
	:: release(me, n)
	:: canForget -> forget(me, n); tryRelease(n)
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
	short old, nw, t, h, base, free, gr;
	bool ok, fits, idle;
	byte i, j, k, w, mask;

#ifdef WITH_CLOSE
	close();
#else
	if
	:: setLimit(0)
	:: setLimit(1)
	:: tryRelease(1)
	fi;
	setLimit(MAXP);
#endif
	finished++
}

init
{
	atomic {
		wn[0] = 2; wn[1] = 1; wn[2] = 1;
		run client(0, 2, 1, 0, 1);
		run client(1, 1, 1, 1, CLIENT1_ROUNDS);
		run client(2, 1, 0, 0, 1);
		run controller()
	}
	finished == NC + 1;
	assert(qlen == 0 && !WAITERS(word) && mu == 0 && busy == 0);
	assert(HELD(word) == 0 && SUMHELD == 0 && COUNT(word) == TOTAL(word));
	assert(len(ev[0]) == 0 && len(ev[1]) == 0 && len(ev[2]) == 0);
#ifndef WITH_CLOSE
	assert(TOTAL(word) == MAXP)
#endif
}
