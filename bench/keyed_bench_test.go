package bench_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/sethvargo/go-limiter/memorystore"
	"golang.org/x/time/rate"

	"github.com/atomicsem/atomicsem/keyed"
	"github.com/atomicsem/atomicsem/overload"
)

// Limits per key: keyed.Limiter against what Go programs keep per client
// today, one *rate.Limiter per key in a sync.Map (never dropped) or in a
// mutex-guarded LRU (hashicorp/golang-lru, which drops the least recently
// used key when full, limited or not), and sethvargo/go-limiter's memory
// store. Every implementation gets the same configuration (rate 10 a
// second, burst 10) and the same pre-generated sequence of keys, IPv4
// addresses as a server would see them, through perKey, so the dynamic
// call costs every column the same. The floor row is a map of counters,
// the least any of them could do; floorclock adds the one read of the
// monotonic clock per request that every limiter here makes.

const (
	keyedRate  = 10
	keyedBurst = 10
	heapRate   = 0.001 // the rate of BenchmarkKeyedHeap
)

// The sizes of the workloads. With KEYED_BENCH_SMALL set (CI's run-once
// check does) they shrink a hundredfold, so that a check that every
// benchmark still runs takes seconds.
var (
	keyedKeys   = 1_000_000  // distinct keys of the workloads
	keyedSeqLen = 1 << 22    // requests in the pre-generated sequence
	attackKeys  = 10_000_000 // distinct keys of the attack
	attackCap   = 100_000    // the cap the attack runs against
	attackEvery = 1_000_000  // the attack measures the live heap this often
)

func init() {
	if os.Getenv("KEYED_BENCH_SMALL") != "" {
		keyedKeys, keyedSeqLen = 10_000, 1<<16
		attackKeys, attackCap, attackEvery = 100_000, 1_000, 10_000
	}
}

// perKey is what each implementation offers the per-key benchmarks.
type perKey interface {
	allow(key string) bool
	close()
}

type keyedPerKey struct{ l *keyed.Limiter }

func (p keyedPerKey) allow(key string) bool { return p.l.TrySpend(key, 1) }
func (keyedPerKey) close()                  {}

type syncMapPerKey struct {
	m *sync.Map
	r rate.Limit
}

func (p syncMapPerKey) allow(key string) bool {
	v, ok := p.m.Load(key)
	if !ok {
		v, _ = p.m.LoadOrStore(key, rate.NewLimiter(p.r, keyedBurst))
	}
	return v.(*rate.Limiter).Allow()
}
func (syncMapPerKey) close() {}

type lruPerKey struct {
	c *lru.Cache[string, *rate.Limiter]
	r rate.Limit
}

func (p lruPerKey) allow(key string) bool {
	l, ok := p.c.Get(key)
	if !ok {
		l = rate.NewLimiter(p.r, keyedBurst)
		if found, _ := p.c.ContainsOrAdd(key, l); found {
			l, _ = p.c.Get(key)
		}
	}
	return l.Allow()
}
func (lruPerKey) close() {}

type goLimiterPerKey struct {
	s interface {
		Take(context.Context, string) (uint64, uint64, uint64, bool, error)
		Close(context.Context) error
	}
}

func (p goLimiterPerKey) allow(key string) bool {
	_, _, _, ok, _ := p.s.Take(context.Background(), key)
	return ok
}
func (p goLimiterPerKey) close() { _ = p.s.Close(context.Background()) }

// floorPerKey is the least a per-key table built on a Go map does per
// request: one lookup under one mutex and one write to the key's own word,
// with no clock, no rate arithmetic and no cap. It is the floor of the
// request rows, not a limiter.
type floorPerKey struct {
	mu *sync.Mutex
	m  map[string]*int64
}

func (p floorPerKey) allow(key string) bool {
	p.mu.Lock()
	c := p.m[key]
	if c == nil {
		c = new(int64)
		p.m[key] = c
	}
	*c++
	p.mu.Unlock()
	return true
}
func (floorPerKey) close() {}

// floorClockPerKey is floorPerKey with one read of the monotonic clock per
// request, which every limiter here makes: the floor of a limiter that
// keeps time.
type floorClockPerKey struct {
	floorPerKey
	epoch time.Time
}

func (p floorClockPerKey) allow(key string) bool {
	p.mu.Lock()
	c := p.m[key]
	if c == nil {
		c = new(int64)
		p.m[key] = c
	}
	*c += int64(time.Since(p.epoch))
	p.mu.Unlock()
	return true
}

// perKeyImpls makes each implementation, for maxKeys keys at most where it
// has a bound, at r credits a second (burst keyedBurst).
var perKeyImpls = []struct {
	name string
	make func(maxKeys int, r float64) perKey
}{
	{"keyed", func(maxKeys int, r float64) perKey {
		return keyedPerKey{keyed.MustNewLimiter(r, keyedBurst, keyed.WithMaxKeys(int64(maxKeys)))}
	}},
	{"syncmap", func(_ int, r float64) perKey { return syncMapPerKey{new(sync.Map), rate.Limit(r)} }},
	{"lru", func(maxKeys int, r float64) perKey {
		c, err := lru.New[string, *rate.Limiter](maxKeys)
		if err != nil {
			panic(err)
		}
		return lruPerKey{c, rate.Limit(r)}
	}},
	{"floor", func(int, float64) perKey { return floorPerKey{new(sync.Mutex), map[string]*int64{}} }},
	{"floorclock", func(int, float64) perKey {
		return floorClockPerKey{floorPerKey{new(sync.Mutex), map[string]*int64{}}, time.Now()}
	}},
	{"golimiter", func(_ int, r float64) perKey {
		s, err := memorystore.New(&memorystore.Config{
			Tokens: keyedBurst, Interval: time.Duration(float64(keyedBurst) / r * float64(time.Second)),
		})
		if err != nil {
			panic(err)
		}
		return goLimiterPerKey{s}
	}},
}

// keyedWorkload is the keys and a sequence of indices into them.
type keyedWorkload struct {
	keys []string
	seq  []int32
}

var (
	workloadsOnce sync.Once
	workloads     map[string]*keyedWorkload
)

// keyedWorkloads returns the uniform and the Zipf(1.1) workloads over the
// same keys, made once per process with fixed seeds.
func keyedWorkloads() map[string]*keyedWorkload {
	workloadsOnce.Do(func() {
		keys := make([]string, keyedKeys)
		for i := range keys {
			keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		}
		r := rand.New(rand.NewSource(48))
		// Zipf ranks name keys in a random order, so that the hot keys are
		// not the first ones generated.
		perm := r.Perm(keyedKeys)
		zipf := rand.NewZipf(r, 1.1, 1, uint64(keyedKeys-1))
		uniform := &keyedWorkload{keys: keys, seq: make([]int32, keyedSeqLen)}
		zipfian := &keyedWorkload{keys: keys, seq: make([]int32, keyedSeqLen)}
		for i := range keyedSeqLen {
			uniform.seq[i] = int32(r.Intn(keyedKeys))
			zipfian.seq[i] = int32(perm[zipf.Uint64()])
		}
		workloads = map[string]*keyedWorkload{"uniform": uniform, "zipf": zipfian}
	})
	return workloads
}

// BenchmarkKeyedRequest is the cost of one request on a key already
// present: every key of the workload has been used once before the timer
// starts. With -cpu 2 two goroutines share the sequence, each from its own
// place in it. The table warmed up for a sub-benchmark is kept across the
// calls that size b.N, so the warm-up runs once per row and -cpu value.
// cpu-ns/op, the process's CPU time per request (both threads' with -cpu
// 2), is the figure to compare on a shared machine.
func BenchmarkKeyedRequest(b *testing.B) {
	w := keyedWorkloads()
	var warm struct {
		name string
		p    perKey
	}
	b.Cleanup(func() {
		if warm.p != nil {
			warm.p.close()
		}
	})
	for _, wl := range []string{"uniform", "zipf"} {
		for _, impl := range perKeyImpls {
			b.Run("workload="+wl+"/impl="+impl.name, func(b *testing.B) {
				if warm.name != b.Name() {
					if warm.p != nil {
						warm.p.close()
					}
					warm.name, warm.p = b.Name(), impl.make(keyedKeys, keyedRate)
					for _, k := range w[wl].keys {
						warm.p.allow(k)
					}
				}
				p := warm.p
				var start atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				defer measureCPU(b)()
				b.RunParallel(func(pb *testing.PB) {
					i := int(start.Add(int64(keyedSeqLen / 7)))
					seq, keys := w[wl].seq, w[wl].keys
					for pb.Next() {
						p.allow(keys[seq[i%keyedSeqLen]])
						i++
					}
				})
			})
		}
	}
}

// BenchmarkKeyedNewKey is the cost of a request on a key not yet present:
// allocs/op is the allocations per new key.
func BenchmarkKeyedNewKey(b *testing.B) {
	keys := keyedWorkloads()["uniform"].keys
	for _, impl := range perKeyImpls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			p := impl.make(keyedKeys, keyedRate)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%keyedKeys == 0 && i > 0 {
					b.StopTimer()
					p.close()
					p = impl.make(keyedKeys, keyedRate)
					b.StartTimer()
				}
				p.allow(keys[i%keyedKeys])
			}
			b.StopTimer()
			p.close()
		})
	}
}

// BenchmarkKeyedHeap is the live heap per key of a table holding the
// million keys of the workloads, each used once (B/key), measured after a
// collection. The keys' own strings are made before and not counted. The
// rate is one credit in 1,000 s, so that no key's bucket is full again
// before the end and every implementation holds every key.
func BenchmarkKeyedHeap(b *testing.B) {
	keys := keyedWorkloads()["uniform"].keys
	for _, impl := range perKeyImpls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			var perKey float64
			for range b.N {
				before := liveHeap()
				p := impl.make(keyedKeys, heapRate)
				for _, k := range keys {
					p.allow(k)
				}
				perKey = float64(liveHeap()-before) / float64(keyedKeys)
				runtime.KeepAlive(p)
				p.close()
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

// BenchmarkKeyedAttack sends 10,000,000 distinct keys, one request each,
// at a table capped at 100,000 keys, and reports the largest live heap
// the table held, measured after a collection every 1,000,000 keys
// (peak-B), that per key of the cap (peak-B/capkey), and the share of the
// attack's keys refused (refused/key; the LRU refuses none, as it drops
// keys in the middle of their limits). Each key string is made as a server
// makes it, per request.
func BenchmarkKeyedAttack(b *testing.B) {
	for _, impl := range perKeyImpls {
		if impl.name != "keyed" && impl.name != "lru" {
			continue // the others have no bound: 10,000,000 keys stay
		}
		b.Run("impl="+impl.name, func(b *testing.B) {
			var peak int64
			var refused int
			buf := make([]byte, 0, 32)
			for range b.N {
				before := liveHeap()
				p := impl.make(attackCap, keyedRate)
				peak, refused = 0, 0
				for i := range attackKeys {
					buf = strconv.AppendInt(append(buf[:0], "k"...), int64(i), 10)
					if !p.allow(string(buf)) {
						refused++
					}
					if (i+1)%attackEvery == 0 {
						peak = max(peak, liveHeap()-before)
					}
				}
				runtime.KeepAlive(p)
				p.close()
			}
			b.ReportMetric(float64(peak), "peak-B")
			b.ReportMetric(float64(peak)/float64(attackCap), "peak-B/capkey")
			b.ReportMetric(float64(refused)/float64(attackKeys), "refused/key")
		})
	}
}

// BenchmarkKeyedAtCap is the cost of a request on a new key that finds
// the table at its cap with every key in the middle of its limit (one
// credit in 1,000 s, each key's burst of 1 spent), so that it is refused:
// the work a flood of new keys makes per key once the table is full. The
// cap is 1,000 keys and the million of the workloads. One refusal runs
// before the timer starts, so that the row is the steady state.
func BenchmarkKeyedAtCap(b *testing.B) {
	keys := keyedWorkloads()["uniform"].keys
	fresh := make([]string, 1<<16)
	for i := range fresh {
		fresh[i] = "new-" + strconv.Itoa(i)
	}
	for _, maxKeys := range []int{1000, keyedKeys} {
		b.Run(fmt.Sprintf("cap=%d/impl=keyed", maxKeys), func(b *testing.B) {
			l := keyed.MustNewLimiter(heapRate, 1, keyed.WithMaxKeys(int64(maxKeys)))
			for _, k := range keys[:maxKeys] {
				if !l.TrySpend(k, 1) {
					b.Fatalf("the table refused %s below its cap", k)
				}
			}
			if l.TrySpend("warm-up", 1) {
				b.Fatal("a new key was taken at the cap")
			}
			b.ReportAllocs()
			b.ResetTimer()
			refused := 0
			for i := range b.N {
				if !l.TrySpend(fresh[i%len(fresh)], 1) {
					refused++
				}
			}
			b.StopTimer()
			if refused != b.N {
				b.Fatalf("%d of %d new keys taken at the cap", b.N-refused, b.N)
			}
		})
	}
}

// liveHeap returns the bytes of live heap objects after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// limitHeapKeys is how many keys BenchmarkKeyedLimitHeap's tables hold.
var limitHeapKeys = 100_000

func init() {
	if os.Getenv("KEYED_BENCH_SMALL") != "" {
		limitHeapKeys = 1_000
	}
}

// BenchmarkKeyedLimitHeap is the live heap per key of keyed's tables of
// concurrency limits holding 100,000 keys (B/key): a semaphore per key
// (keyed.Semaphores) beside a priority gate per key (keyed.Gates) of 1, 2
// and 4 classes. Each key is acquired and released once; below its cap a
// table drops no key, so every key stays. The keys' own strings are made
// before and not counted.
func BenchmarkKeyedLimitHeap(b *testing.B) {
	keys := make([]string, limitHeapKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
	}
	gates := func(k int) func() func(string) {
		classes := make([]overload.Class, k)
		for c := range classes {
			classes[c] = overload.Class{Name: fmt.Sprint("c", c), Share: 1 / float64(k)}
		}
		return func() func(string) {
			s := keyed.MustNewGates(4, classes)
			return func(key string) {
				tok, _ := s.TryAcquire(key, k-1, 1)
				tok.Release()
			}
		}
	}
	impls := []struct {
		name string
		make func() func(key string)
	}{
		{"semaphores", func() func(string) {
			s := keyed.MustNewSemaphores(4)
			return func(key string) {
				tok, _ := s.TryAcquire(key, 1)
				tok.Release()
			}
		}},
		{"gates-1", gates(1)},
		{"gates-2", gates(2)},
		{"gates-4", gates(4)},
	}
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			var perKey float64
			for range b.N {
				before := liveHeap()
				use := impl.make()
				for _, k := range keys {
					use(k)
				}
				perKey = float64(liveHeap()-before) / float64(len(keys))
				runtime.KeepAlive(use)
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}
