// Package etcdsem provides atomicsem's weighted semaphore for a fleet: one
// limit shared by every process that opens the same semaphore on an etcd
// cluster, with the same vocabulary and rules as the in-process one.
//
// A semaphore lives under a key prefix. Its config key holds the live limit,
// the maximum fixed when the semaphore was first created, and a closed flag.
// Every Acquire writes a key of its own under the prefix, bound to the lease
// of the caller's etcd session, that holds its weight and whether it waits
// or holds permits. The keys' create revisions order the acquirers by their
// arrival at etcd, and permits are granted by the in-process rules, walking
// the waiters in that order: one that fits the free permits is granted, one
// that fits the limit but not the free permits holds back those behind it
// (so a large request is never starved), and one that asks for more than the
// limit is passed over, keeping its place until the limit admits it. Held is
// the sum of the held keys' weights; Available is Limit − Held, negative
// while the limit is set below what tokens hold.
//
// A grant is one transaction that turns the admitted waiters' keys to
// held, made only if the config and those keys are as the view it was
// computed from saw them, so that no grant outlives a limit change or
// overtakes another; a release is the deletion of the holder's key, made
// only while the key is the one the holder created, which lets the
// waiters it admits grant themselves. A waiting Acquire watches
// only the keys whose change can admit it (the waiter ahead of it, or the
// holders when it is first in line) and the config, so that a change wakes
// only the waiters it can admit. A holder whose process dies, or whose
// session expires, gives its permits back when its lease ends: etcd
// deletes its keys. A holder that must not act once it has lost its
// permits guards its writes with the Fence that AcquireFenced returns. See
// docs/fleet.md for the key layout, the recovery bound and the argument.
//
// # Network faults
//
// A request can reach etcd late: after its client gave up on it (a reset
// connection, a deadline) and tried again, or after the call that sent it
// returned. Every write is therefore conditional on what its sender knew,
// compared on etcd's revisions, which are never reused, so that a write
// applied late changes nothing: a grant compares the config and each
// grantee's key; a key is created only while its handle's floor key is as
// it was when the write was sent, and a give-up moves the floor key on;
// a release, or an Acquire that takes its key back, deletes the key only
// while its create revision is its owner's; a partial release or a
// Forget compares the key's mod revision. Delays, resets, duplicated
// attempts and requests delivered late never grant more than the limit,
// never grant out of order, and never delete a key its owner still holds,
// even under a key name the handle uses again. What faults can do is
// delay: a request that fails is ErrUnavailable to the caller (its outcome
// unknown, for a change of the config) and is retried in the background
// where it gives permits back; and a holder cut off from etcd for longer
// than its session's TTL loses its permits when its lease runs out, which
// Done tells it only late and the Fence guards against. The etcd client
// needs no setting for this; docs/fleet.md says which ones shorten
// recovery.
//
// Calls that go over the network take a context and return an error where
// the in-process semaphore returns a bool or nothing; the bool (or count)
// keeps the in-process answer, and the error says why a call could not be
// answered (ctx.Err(), ErrUnavailable, ErrSessionLost) or was refused for a
// reason the in-process semaphore also refuses for (ErrClosed,
// ErrInvalidPermits, ErrExceedsMax). The errors that match atomicsem's
// sentinels also match them with errors.Is, so code written against either
// semaphore can test for them the same way.
//
// Tokens are token.Token values, as in-process; Release, Forget and the
// Release or Forget of a part made by Split each take one round trip,
// retried while the connection is broken for up to the Semaphore's
// timeout. A token cannot return an error: if its round trip still fails,
// the call returns and the Semaphore goes on making it in the background
// until it succeeds or the session ends, so the token's permits come back
// once etcd can be reached, and never later than the lease. Only a write
// that fails for another reason (its key holds what its owner did not
// write) makes the Semaphore give up its session; Done is then closed and
// Err says why.
//
// A process that acquires and releases many times a second leases
// permits instead (NewPool): its Pool holds blocks of the semaphore's
// permits, each taken by one Acquire, and serves the process's acquires
// from them in-process, at atomicsem's cost. Every permit a pool hands out
// is held in etcd, so the limit holds across the fleet exactly; a pool
// gives back permits it has not used for an interval, shrinks to its fair
// share while another process waits or the limit was lowered, and stops
// serving before its session's lease could run out (see Pool).
//
// It is a run-time error to pass New a nil context, session or Option, or
// to call a method on a nil *Semaphore, on the zero Semaphore or with a
// nil context; the panic's message begins "etcdsem: " and names the
// argument.
package etcdsem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atomicsem/atomicsem/semcontract"
)

// MaxPermits is the largest value for a semaphore's maximum, limit, or a
// single request, the same as atomicsem.MaxPermits.
const MaxPermits = semcontract.MaxPermits

// floorDir is where, under a semaphore's prefix, handles keep their floor
// keys (see cleanUp).
const floorDir = "f/"

// DefaultTimeout bounds each round trip to etcd unless WithTimeout says
// otherwise.
const DefaultTimeout = 5 * time.Second

// sentinel is an error that also matches one of atomicsem's sentinels with
// errors.Is, so that a caller can test for the in-process condition without
// knowing which semaphore it has.
type sentinel struct {
	msg  string
	core error
}

func (e *sentinel) Error() string        { return e.msg }
func (e *sentinel) Is(target error) bool { return target == e.core }

var (
	// ErrClosed is returned by the calls that would change the count after
	// Close. It matches atomicsem.ErrClosed.
	ErrClosed error = &sentinel{"etcdsem: semaphore is closed", semcontract.ErrClosed}
	// ErrExceedsMax is returned (wrapped, with the numbers) when a request
	// or a limit is larger than the semaphore's maximum. It matches
	// atomicsem.ErrExceedsMax.
	ErrExceedsMax error = &sentinel{"etcdsem: exceeds the semaphore's maximum", semcontract.ErrExceedsMax}
	// ErrInvalidPermits is returned (wrapped, with the numbers) for a
	// negative count or one above MaxPermits, and by New for arguments
	// outside 0 ≤ initial ≤ max ≤ MaxPermits. It matches
	// atomicsem.ErrInvalidPermits.
	ErrInvalidPermits error = &sentinel{"etcdsem: invalid number of permits", semcontract.ErrInvalidPermits}
	// ErrSessionLost is returned once the Semaphore's session has ended:
	// its lease expired, its client was closed, or the Semaphore gave the
	// session up after a round trip it could not complete. The tokens
	// taken under the session are void: etcd returns their permits when
	// the lease ends.
	ErrSessionLost = errors.New("etcdsem: session lost; its tokens are void")
	// ErrUnavailable is returned (wrapped, with the cause) when etcd did
	// not answer a round trip within the Semaphore's timeout, or answered
	// that it could not serve it (its own request timeout, no leader),
	// while the caller's context was still live.
	ErrUnavailable = errors.New("etcdsem: etcd did not answer")
	// ErrForeignKeys is returned (wrapped, with the key) when the prefix
	// holds a key that is not one of this package's: a prefix shared with
	// other data, or a semaphore written by an incompatible version.
	ErrForeignKeys = errors.New("etcdsem: the prefix holds keys that are not a semaphore's")
	// ErrMaxMismatch is returned by New when the semaphore already exists
	// under the prefix with a different maximum.
	ErrMaxMismatch = errors.New("etcdsem: the semaphore exists with a different maximum")
	// ErrInvalidPrefix is returned by New for an empty prefix.
	ErrInvalidPrefix = errors.New("etcdsem: the prefix is empty")
	// ErrNestedPrefix is returned (wrapped, with both prefixes) by New when
	// the prefix lies inside another semaphore's prefix, or contains one: a
	// semaphore reads every key under its prefix, so one nested in another
	// would break both.
	ErrNestedPrefix = errors.New("etcdsem: the prefix nests with another semaphore's")
)

// Semaphore is a handle on a weighted semaphore kept in etcd, shared by
// every handle opened on the same prefix, in this process or any other.
//
// A Semaphore keeps no count of its own: each call reads or changes the
// state in etcd, so two handles on the same prefix always agree. It is safe
// for concurrent use. It holds its keys under the lease of the session it
// was made with, which must outlive it; ending the session (or losing it)
// returns every permit the handle's tokens hold and fails the handle's
// waiting Acquire calls with ErrSessionLost. The session's TTL bounds how
// long a crashed holder keeps its permits (see docs/fleet.md).
//
// # Fairness
//
// The semaphore is FIFO across the fleet, by the order in which acquirers'
// keys were created in etcd. While a waiter that the current limit admits is
// queued, no Acquire or TryAcquire on any handle takes permits ahead of it; a
// waiter that asks for more than the current limit does not hold back
// others, and competes from its place as soon as the limit admits it.
//
// # Consistency
//
// Every change is a transaction in etcd, so the changes to one semaphore are
// totally ordered by etcd's revisions: a grant is made only if the limit
// has not moved since the view it was computed from and its grantees still
// wait as that view saw them, a config change only if the config is what
// it was computed from, and Stats reads the whole semaphore at one
// revision. Waiters learn of changes through watches: an Acquire waiting
// when another handle calls Close returns ErrClosed once its watch on the
// config delivers the change, but no permit is granted after the Close's
// revision.
//
// A Semaphore must be made with New: the zero value is not a handle, and
// its methods panic.
//
// Memory ordering: within the etcd history, the deletion that releases
// permits comes before the grant that reuses them. Across processes there
// is no Go memory model; within one process the path from a Release to the
// Acquire it admits runs through the network, which the race detector does
// not follow, so goroutines that share memory must not rely on the
// semaphore alone to order their accesses.
type Semaphore struct {
	session *concurrency.Session
	client  *clientv3.Client
	prefix  string // the caller's prefix, ending in "/"
	cfgKey  string // prefix + "config"
	keyDir  string // prefix + "k/": the acquirers' keys
	floor   string // prefix + floorDir + "<lease>-<id>": the handle's floor key (see cleanUp)
	max     int64  // fixed when the semaphore was first created
	timeout time.Duration
	id      uint64 // random, so that handles sharing a lease name keys apart
	seq     atomic.Uint64

	keysMu   sync.Mutex
	freeKeys []string // key names to use again, guarded by keysMu (see newKey)
	// floorMod is the floor key's mod revision as the handle last wrote or
	// read it (0 while the key does not exist). Every write that creates
	// an acquirer's key compares the floor key's mod revision with it.
	floorMod atomic.Int64

	mu     sync.Mutex
	cfg    config               // the latest config seen, guarded by mu
	lost   error                // why the session was given up, guarded by mu
	parked map[*waiter]struct{} // Acquire calls waiting, guarded by mu
	live   context.Context      // ends with the session; nil until a Fence needs it, guarded by mu
}

// An Option configures a Semaphore in New.
type Option func(*options)

type options struct {
	timeout time.Duration
}

// WithTimeout bounds every round trip the Semaphore makes to etcd,
// including those of its tokens' Release and Forget, which take no context.
// A round trip that does not finish in time fails with ErrUnavailable; one
// made by a token, or one that takes back a key of a failed Acquire, goes
// on in the background (see the package documentation). A duration of
// zero or less means DefaultTimeout.
func WithTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// config is the content of the config key, and the revision at which it was
// last written.
type config struct {
	Limit  int64 `json:"limit"`
	Max    int64 `json:"max"`
	Closed bool  `json:"closed"`

	value string // the encoded form, as stored
	mod   int64  // the key's mod revision
}

// encode returns c's stored form.
func (c config) encode() string {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // three plain fields always marshal
	}
	return string(b)
}

// decodeConfig parses a config key read at mod revision mod.
func decodeConfig(key string, value []byte, mod int64) (config, error) {
	var c config
	dec := json.NewDecoder(strings.NewReader(string(value)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.Limit < 0 || c.Limit > c.Max || c.Max > MaxPermits {
		return config{}, fmt.Errorf("%w: %q holds %q", ErrForeignKeys, key, value)
	}
	c.value, c.mod = string(value), mod
	return c, nil
}

// New opens the semaphore stored under prefix, creating it with initial
// permits available and a ceiling of max if the prefix holds nothing yet. A
// semaphore that exists already is joined as it stands: its live limit is
// kept and initial is ignored, but its maximum must equal max.
//
// The handle writes its keys under session's lease; the session must stay
// open while the handle is used, and ending it returns every permit the
// handle's tokens hold.
//
// A semaphore reads every key under its prefix, so prefixes must not nest:
// New refuses a prefix inside another semaphore's prefix, or one that
// contains a semaphore, with ErrNestedPrefix.
//
// New returns ErrInvalidPermits unless 0 ≤ initial ≤ max ≤ MaxPermits,
// ErrInvalidPrefix for an empty prefix, ErrNestedPrefix, ErrMaxMismatch if the semaphore
// exists with another maximum, ErrForeignKeys if the prefix holds keys that
// are not a semaphore's, ErrSessionLost if the session has ended, and
// ctx.Err() or ErrUnavailable if etcd does not answer; in each case it
// writes nothing.
func New(ctx context.Context, session *concurrency.Session, prefix string, initial, max int64, opts ...Option) (*Semaphore, error) {
	if ctx == nil {
		panic("etcdsem: New: nil context")
	}
	if session == nil {
		panic("etcdsem: New: nil session")
	}
	for _, opt := range opts {
		if opt == nil {
			panic("etcdsem: New: nil Option")
		}
	}
	if err := semcontract.CheckNew(initial, max, ErrInvalidPermits); err != nil {
		return nil, err
	}
	if prefix == "" {
		return nil, ErrInvalidPrefix
	}
	o := options{timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	s := &Semaphore{
		session: session,
		client:  session.Client(),
		prefix:  prefix,
		cfgKey:  prefix + "config",
		keyDir:  prefix + "k/",
		max:     max,
		timeout: o.timeout,
		id:      rand.Uint64(),
		parked:  make(map[*waiter]struct{}),
	}
	s.floor = fmt.Sprintf("%s%s%016x-%016x", prefix, floorDir, int64(session.Lease()), s.id)
	if err := s.alive(); err != nil {
		return nil, err
	}

	// Create the config only where the prefix holds nothing at all and no
	// enclosing prefix holds a semaphore's config; otherwise read what is
	// there, to join or to refuse.
	ancestors := enclosing(prefix)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.Version(prefix), "=", 0).WithPrefix()}
	orElse := []clientv3.Op{clientv3.OpGet(prefix, clientv3.WithPrefix())}
	for _, a := range ancestors {
		cmps = append(cmps, clientv3.Compare(clientv3.Version(a+"config"), "=", 0))
		orElse = append(orElse, clientv3.OpGet(a+"config", clientv3.WithCountOnly()))
	}
	fresh := config{Limit: initial, Max: max}
	rctx, cancel := s.rpcContext(ctx)
	defer cancel()
	resp, err := s.client.Txn(rctx).If(cmps...).Then(clientv3.OpPut(s.cfgKey, fresh.encode())).Else(orElse...).Commit()
	if err != nil {
		return nil, s.rpcError(ctx, err)
	}
	if resp.Succeeded {
		fresh.value, fresh.mod = fresh.encode(), resp.Header.Revision
		s.cfg = fresh
		return s, nil
	}
	for i, a := range ancestors {
		if resp.Responses[i+1].GetResponseRange().Count > 0 {
			return nil, fmt.Errorf("%w: %q lies inside the semaphore at %q", ErrNestedPrefix, prefix, a)
		}
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	for _, kv := range kvs {
		if k := string(kv.Key); strings.HasSuffix(k, "/config") && k != s.cfgKey && !strings.HasPrefix(k, s.keyDir) {
			if _, err := decodeConfig(k, kv.Value, kv.ModRevision); err == nil {
				return nil, fmt.Errorf("%w: %q holds the semaphore at %q", ErrNestedPrefix, prefix, strings.TrimSuffix(k, "config"))
			}
		}
	}
	v, err := s.viewOf(resp.Header.Revision, kvs)
	if err != nil {
		return nil, err
	}
	if v.cfg.mod == 0 {
		return nil, fmt.Errorf("%w: %q has keys but no config", ErrForeignKeys, prefix)
	}
	if v.cfg.Max != max {
		return nil, fmt.Errorf("%w: asked for %d, %q has %d", ErrMaxMismatch, max, prefix, v.cfg.Max)
	}
	s.cfg = v.cfg
	return s, nil
}

// enclosing returns the prefixes that enclose prefix, which ends in "/":
// each of its proper prefixes that ends in "/", shortest first.
func enclosing(prefix string) []string {
	var out []string
	for i := 0; i < len(prefix)-1; i++ {
		if prefix[i] == '/' {
			out = append(out, prefix[:i+1])
		}
	}
	return out
}

// Prefix returns the prefix the semaphore is stored under, ending in "/".
func (s *Semaphore) Prefix() string {
	s.check("Prefix", context.Background())
	return s.prefix
}

// Max returns the semaphore's ceiling, fixed when it was first created.
func (s *Semaphore) Max() int64 {
	s.check("Max", context.Background())
	return s.max
}

// Done returns a channel that is closed when the handle's session ends:
// its lease expired or was revoked, its client was closed, or the handle
// gave the session up after a token's round trip failed. The handle's
// tokens are void from then on, and its calls return ErrSessionLost.
func (s *Semaphore) Done() <-chan struct{} {
	s.check("Done", context.Background())
	return s.session.Done()
}

// Err returns nil while the handle's session lives, and afterwards an error
// that matches ErrSessionLost and says why the session ended.
func (s *Semaphore) Err() error {
	s.check("Err", context.Background())
	select {
	case <-s.session.Done():
	default:
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost != nil {
		return fmt.Errorf("%w: given up after %w", ErrSessionLost, s.lost)
	}
	return fmt.Errorf("%w: its lease expired or its client was closed", ErrSessionLost)
}

// alive returns ErrSessionLost if the session has ended, and nil otherwise.
func (s *Semaphore) alive() error {
	select {
	case <-s.session.Done():
		return s.Err()
	default:
		return nil
	}
}

// abandon gives the session up after a round trip on a key of the handle
// failed for a reason other than a broken connection: the key holds what
// its owner did not write, so no write of the handle can put it right. The
// lease is no longer renewed, so etcd deletes every key under it once it
// runs out, which returns their permits. It returns err.
func (s *Semaphore) abandon(err error) error {
	s.mu.Lock()
	if s.lost == nil {
		s.lost = err
	}
	s.mu.Unlock()
	s.session.Orphan()
	return err
}

// persist makes op, a round trip on a key of the handle that is safe to
// repeat (a deletion, or a compare-and-swap that a first attempt, if
// made, makes fail), even if the caller's ctx is done. It retries op while
// the connection is broken, for up to the handle's timeout; if op has
// still not been made, persist returns and a goroutine goes on making it
// until it succeeds or the session ends. Until then the key holds what it
// held: a token's permits stay held, a waiter's key stays in line, but no
// longer than the session, whose lease runs out if the handle cannot reach
// etcd. The handle's other tokens and calls go on. If op fails for another
// reason, the handle gives up its session (see abandon).
func (s *Semaphore) persist(ctx context.Context, what string, op func(context.Context) error) {
	if s.alive() != nil {
		return // the key goes with the lease
	}
	dctx, cancel := s.detachedContext(ctx)
	err := retry(dctx, op)
	cancel()
	switch {
	case err == nil:
	case transient(err):
		go s.persistLater(what, op)
	default:
		s.abandon(fmt.Errorf("%s: %w", what, err))
	}
}

// persistLater makes op, for persist, until it succeeds or the session ends.
func (s *Semaphore) persistLater(what string, op func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.session.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		err := retry(ctx, op)
		switch {
		case err == nil || ctx.Err() != nil:
			return
		case !transient(err):
			s.abandon(fmt.Errorf("%s: %w", what, err))
			return
		}
		select {
		case <-time.After(maxBackoff):
		case <-ctx.Done():
			return
		}
	}
}

// transient reports whether err is that of a round trip that did not
// reach etcd or did not finish in time.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// lossContext returns a context that ends when the session does, starting
// the goroutine that ends it on first use.
func (s *Semaphore) lossContext() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		ctx, cancel := context.WithCancel(context.Background())
		s.live = ctx
		go func() {
			<-s.session.Done()
			cancel()
		}()
	}
	return s.live
}

// check panics, naming op, if s is nil or the zero Semaphore, or if ctx is
// nil: caller bugs that would otherwise fail far from the call (a zero
// Semaphore's maximum is 0, so its Acquire would say the request exceeds
// it).
func (s *Semaphore) check(op string, ctx context.Context) {
	if s == nil {
		panic("etcdsem: " + op + " on a nil *Semaphore")
	}
	if s.session == nil {
		panic("etcdsem: " + op + " on a zero Semaphore; make one with New")
	}
	if ctx == nil {
		panic("etcdsem: " + op + " with a nil context")
	}
}

// rpcContext returns the context for one round trip on behalf of a caller
// whose context is ctx.
func (s *Semaphore) rpcContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// detachedContext returns the context for a round trip that must be made
// even though the caller's ctx is done: a cancelled acquire's cleanup.
func (s *Semaphore) detachedContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
}

// rpcError turns the error of a round trip made for a caller whose context
// is ctx into the error the caller sees: ctx.Err() if ctx is done,
// ErrSessionLost if the session has ended, or etcd refused a write because
// its lease has (the client hears of it only at its next renewal),
// ErrUnavailable (wrapping the cause) if etcd did not answer in time, and
// otherwise the cause, wrapped.
func (s *Semaphore) rpcError(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if lost := s.alive(); lost != nil {
		return lost
	}
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("%w: etcd no longer has its lease: %w", ErrSessionLost, err)
	}
	switch grpcCode(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return fmt.Errorf("%w within %v: %w", ErrUnavailable, s.timeout, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w within %v: %w", ErrUnavailable, s.timeout, err)
	}
	return fmt.Errorf("etcdsem: %w", err)
}

// grpcCode returns err's gRPC code: a status error's, or that of the error
// the etcd client makes of a server's refusal (an rpctypes.EtcdError, such
// as "request timed out" or "no leader"), which keeps the code but not the
// status.
func grpcCode(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code()
	}
	return status.Code(err)
}

// checkRequest validates a request for n permits.
func (s *Semaphore) checkRequest(n int64) error {
	return semcontract.CheckRequest(n, s.max, ErrInvalidPermits, ErrExceedsMax)
}

// noteConfig records c as the latest config seen, unless a later one has
// been seen already.
func (s *Semaphore) noteConfig(c config) {
	s.mu.Lock()
	if c.mod > s.cfg.mod {
		s.cfg = c
	}
	s.mu.Unlock()
}

// cachedConfig returns the latest config seen. It may be stale; every
// change made from it is a compare-and-swap on its value.
func (s *Semaphore) cachedConfig() config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// newKey returns a key name that no live acquirer uses: the lease, the
// handle's random id and a number. Names come back through freeKey once
// their key is deleted and no write of theirs can land any more, and are
// used again: etcd keeps every deleted key in its index until the history
// is compacted, and a prefix read or compare walks them all, so a new name
// per Acquire would make every Acquire slower than the last. The name
// freed last is kept back, so that a handle that releases and acquires
// again at once writes another name: the waiter that watched the released
// key is not woken again by its next write.
func (s *Semaphore) newKey() string {
	s.keysMu.Lock()
	if len(s.freeKeys) > 1 {
		key := s.freeKeys[0]
		s.freeKeys = slices.Delete(s.freeKeys, 0, 1)
		s.keysMu.Unlock()
		return key
	}
	s.keysMu.Unlock()
	return fmt.Sprintf("%s%016x-%016x-%x", s.keyDir, int64(s.session.Lease()), s.id, s.seq.Add(1))
}

// freeKey gives back key, which newKey made: the key is deleted, or was
// never written, and every write of it that may still land is refused.
func (s *Semaphore) freeKey(key string) {
	s.keysMu.Lock()
	s.freeKeys = append(s.freeKeys, key)
	s.keysMu.Unlock()
}
